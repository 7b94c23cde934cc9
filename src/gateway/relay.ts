import { create } from "@bufbuild/protobuf";
import type { Logger } from "pino";
import { type ControlMessage, ControlMessageSchema } from "../gen/llmgw/v1/agent_pb.js";
import { type Command, CommandUndeliverable_Reason, type Event } from "../gen/llmgw/v1/events_pb.js";
import type { LogRecord } from "../log/index.js";
import { EndedSessions } from "./ended-sessions.js";
import { commandUndeliverable } from "./events.js";
import type { GatewayMetrics } from "./metrics.js";
import type { AgentSession } from "./session.js";
import type { Close } from "./session-core/index.js";
import type { PushResult } from "./writer.js";

/** How the relay records an undeliverable command; it never waits for the append. */
export type AppendEvent = (e: Event) => Promise<unknown>;

/**
 * What the relay needs of a session this gateway holds: the gateway's
 * `AgentSession`, or the simulation's (src/simulation/gateway.ts), which
 * runs this relay.
 */
export interface RelayedSession {
  /** "" until the session's Register was read. */
  readonly sessionId: string;
  readonly nodeId: string;
  readonly closing: boolean;
  /** Why the session is ending ("" while it is not). */
  readonly closeDetail: string;
  /** Queues a message for the agent, saying why it was not queued. */
  deliver(msg: ControlMessage): PushResult;
  close(close: Close): void;
}

/** The sessions this gateway holds, by session id (the gateway's `SessionRegistry`). */
export interface HeldSessions<S> {
  get(sessionId: string): S | undefined;
}

/** What the relay logs: the gateway's pino logger, or a silent one. */
export type RelayLogger = Pick<Logger, "debug" | "info" | "warn">;

/** Command id and attempt of the newest undeliverable reports, so each is written once. */
const REPORTED_MAX = 10_000;

/**
 * Relays the reconciler's commands (docs/gateway.md, "Command relay" and
 * "Undeliverable commands"). Each pass in the log carries commands
 * addressed to a node and a session; a command goes to that session's
 * stream if this gateway holds it. A command for a session this gateway held but cannot deliver to (it
 * ended, is ending, or its send queue is full) is reported in the log at
 * once (CommandUndeliverable), so the reconciler re-plans without waiting
 * for the command's deadline. A command for a session this gateway never
 * held is dropped (and counted): another gateway holds it. Time (the age of
 * an ended session, the time of a report) is read from `now`: the process's
 * clock, or the gateway's simulated one.
 */
export class CommandRelay<S extends RelayedSession = AgentSession> {
  readonly #ended = new EndedSessions();
  readonly #reported = new Set<string>();

  constructor(
    private readonly registry: HeldSessions<S>,
    private readonly metrics: Pick<GatewayMetrics, "commandsRelayed" | "commandsDropped">,
    private readonly logger: RelayLogger,
    private readonly gatewayId: string,
    private readonly append: AppendEvent,
    private readonly now: () => number = Date.now,
  ) {}

  /** A session this gateway held has ended: commands still addressed to it are reported, not dropped. */
  sessionEnded(s: Pick<RelayedSession, "sessionId" | "nodeId" | "closeDetail">): void {
    if (s.sessionId === "") return;
    this.#ended.add(s.sessionId, { nodeId: s.nodeId, detail: s.closeDetail, endedAtMs: this.now() });
  }

  onRecord(r: LogRecord): void {
    const body = r.event.body;
    if (body.case !== "reconcilePass") return;
    for (const d of body.value.decisions)
      if (d.kind.case === "sessionsExpired" && d.kind.value.gatewayId === this.gatewayId)
        this.endExpired(d.kind.value.sessions, r.seq);
    for (const cmd of body.value.commands) this.relay(cmd, r.seq);
  }

  /**
   * The reconciler recorded sessions of this gateway as closed (its lease
   * lapsed: the gateway was paused, slow or cut off). Streams that are in
   * fact still open would be live sessions the log calls closed, with their
   * nodes heading for suspect and lost: end them, so the agents register
   * again and the log and reality agree.
   */
  endExpired(sessions: ReadonlyArray<{ nodeId: string; sessionId: string }>, passSeq: number): void {
    for (const ref of sessions) {
      const s = this.registry.get(ref.sessionId);
      if (!s || s.nodeId !== ref.nodeId || s.closing) continue;
      const detail = `the control plane recorded this session closed at sequence ${passSeq} (the lease of gateway ${this.gatewayId} lapsed); register again`;
      this.logger.warn(
        { node: ref.nodeId, session: ref.sessionId, passSeq },
        "session expired by the reconciler; ending its stream",
      );
      s.close({ kind: "expired", detail });
    }
  }

  relay(cmd: Command, passSeq: number): void {
    const msg = controlMessageFor(cmd);
    if (!msg) {
      this.metrics.commandsDropped.inc({ reason: "no_action" });
      this.logger.warn({ command: cmd.commandId, passSeq }, "command without an action dropped");
      return;
    }
    const s = this.registry.get(cmd.sessionId);
    if (!s || s.nodeId !== cmd.nodeId) {
      const ended = this.#ended.get(cmd.sessionId, this.now());
      if (ended && ended.nodeId === cmd.nodeId) {
        const why = `session ${cmd.sessionId} of ${cmd.nodeId} ended on gateway ${this.gatewayId}`;
        this.#undeliverable(cmd, passSeq, SESSION_CLOSED, ended.detail ? `${why}: ${ended.detail}` : why);
      } else this.metrics.commandsDropped.inc({ reason: "not_held" });
      return;
    }
    const closing = (detail: string) =>
      `session ${cmd.sessionId} of ${cmd.nodeId} is closing on gateway ${this.gatewayId}${detail ? `: ${detail}` : ""}`;
    if (s.closing) {
      this.#undeliverable(cmd, passSeq, SESSION_CLOSING, closing(s.closeDetail));
      return;
    }
    const r = s.deliver(msg);
    switch (r) {
      case "queued":
        this.metrics.commandsRelayed.inc();
        this.logger.debug({ command: cmd.commandId, node: cmd.nodeId, passSeq }, "command relayed");
        return;
      case "full":
        this.#undeliverable(cmd, passSeq, QUEUE_FULL, s.closeDetail || "the agent's send queue is full");
        return;
      case "closed":
        this.#undeliverable(cmd, passSeq, SESSION_CLOSING, closing(s.closeDetail));
        return;
      default: {
        const never: never = r;
        void never;
      }
    }
  }

  /** Records once per command id and attempt that `cmd` cannot be delivered, and counts it. */
  #undeliverable(cmd: Command, passSeq: number, reason: CommandUndeliverable_Reason, detail: string): void {
    const label = REASON_LABEL[reason];
    this.metrics.commandsDropped.inc({ reason: label });
    const key = `${cmd.commandId}\u0000${cmd.attempt}`;
    if (this.#reported.has(key)) return;
    this.#reported.add(key);
    if (this.#reported.size > REPORTED_MAX) {
      const oldest = this.#reported.values().next().value;
      if (oldest !== undefined) this.#reported.delete(oldest);
    }
    this.logger.info(
      {
        command: cmd.commandId,
        attempt: cmd.attempt,
        node: cmd.nodeId,
        session: cmd.sessionId,
        passSeq,
        reason: label,
      },
      `command undeliverable: ${detail}`,
    );
    this.append(commandUndeliverable(this.gatewayId, cmd, passSeq, reason, detail, this.now())).catch(
      (err: unknown) => {
        // The command's deadline is the fallback: the reconciler learns of it then.
        this.logger.warn(
          { command: cmd.commandId, err: (err as Error).message },
          "command-undeliverable event not appended",
        );
      },
    );
  }
}

const SESSION_CLOSED = CommandUndeliverable_Reason.SESSION_CLOSED;
const SESSION_CLOSING = CommandUndeliverable_Reason.SESSION_CLOSING;
const QUEUE_FULL = CommandUndeliverable_Reason.QUEUE_FULL;

/** The metric label of each reason (llmgw_gateway_commands_dropped_total). */
const REASON_LABEL: Record<CommandUndeliverable_Reason, string> = {
  [CommandUndeliverable_Reason.UNSPECIFIED]: "undeliverable",
  [SESSION_CLOSED]: "session_closed",
  [SESSION_CLOSING]: "session_closing",
  [QUEUE_FULL]: "queue_full",
};

/** The message that carries `cmd` to its agent; undefined for a command without an action. */
export function controlMessageFor(cmd: Command): ControlMessage | undefined {
  const a = cmd.action;
  switch (a.case) {
    case "start":
      return create(ControlMessageSchema, { msg: { case: "start", value: withId(a.value, cmd.commandId) } });
    case "stop":
      return create(ControlMessageSchema, { msg: { case: "stop", value: withId(a.value, cmd.commandId) } });
    case "drain":
      return create(ControlMessageSchema, { msg: { case: "drain", value: withId(a.value, cmd.commandId) } });
    case undefined:
      return undefined;
    default: {
      const never: never = a;
      return never;
    }
  }
}

/** The action carries the command's id, so the agent's result names it. */
function withId<T extends { commandId: string }>(action: T, commandId: string): T {
  return action.commandId === "" ? { ...action, commandId } : action;
}
