import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Logger } from "pino";
import { type ControlMessage, ControlMessageSchema } from "../gen/llmgw/v1/agent_pb.js";
import { type Command, SessionClosed_Reason } from "../gen/llmgw/v1/events_pb.js";
import type { LogRecord } from "../log/index.js";
import type { GatewayMetrics } from "./metrics.js";
import type { SessionRegistry } from "./registry.js";

/**
 * Relays the reconciler's commands (DESIGN §3.4). Each pass in the log
 * carries commands addressed to a node and a session; a command goes to
 * that session's stream if this gateway holds it, and is dropped (and
 * counted) otherwise: another gateway holds it, or the session is gone and
 * the reconciler re-plans for the next one.
 */
export class CommandRelay {
  constructor(
    private readonly registry: SessionRegistry,
    private readonly metrics: GatewayMetrics,
    private readonly logger: Logger,
    private readonly gatewayId: string,
  ) {}

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
      s.close(SessionClosed_Reason.EXPIRED, detail, new ConnectError(detail, Code.Unavailable));
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
    if (!s || s.nodeId !== cmd.nodeId || s.closing) {
      this.metrics.commandsDropped.inc({ reason: "not_held" });
      return;
    }
    if (s.send(msg)) {
      this.metrics.commandsRelayed.inc();
      this.logger.debug({ command: cmd.commandId, node: cmd.nodeId, passSeq }, "command relayed");
    } else {
      this.metrics.commandsDropped.inc({ reason: "stream_closing" });
    }
  }
}

function controlMessageFor(cmd: Command): ControlMessage | undefined {
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
