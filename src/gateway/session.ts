import { randomUUID } from "node:crypto";
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import type { AgentMessage, ControlMessage } from "../gen/llmgw/v1/agent_pb.js";
import { SessionClosed_Reason } from "../gen/llmgw/v1/events_pb.js";
import { isLogError } from "../log/index.js";
import { coreConfigOf } from "./config.js";
import { gatewayEvent } from "./events.js";
import { peerKey, remoteAddressKey, resetKey } from "./identity.js";
import { OrderedPipeline } from "./ordered.js";
import {
  awaitsAdmission,
  type Close,
  closedEvent,
  closeOutcome,
  type Input,
  initialState,
  isOkAck,
  type PeerIdentity,
  type Reply,
  readDeadlineMs,
  type SessionState,
  type StepResult,
  step,
  usageFlushDelayMs,
} from "./session-core/index.js";
import type { SessionHost } from "./session-host.js";
import { AgentReader } from "./session-reader.js";
import { SessionReport } from "./session-report.js";
import { CoreTimers } from "./session-timers.js";
import { type PushResult, StreamWriter } from "./writer.js";

/** How long a closing stream may take to finish on its own before it is reset. */
const CLOSE_GRACE_MS = 2_000;

/**
 * One agent stream, from the Register to the session-closed event
 * (docs/ARCHITECTURE.md, "Gateway"). What the session does is decided by
 * the pure session core (`session-core/`, `step`); this shell reads the
 * agent (session-reader.ts), runs the core's timers (session-timers.ts),
 * publishes the core's events through the session's ordered pipeline
 * (several in flight, stored and acknowledged in the order the agent sent
 * them; a full pipeline stops the reading, so a slow log slows the agent
 * through HTTP/2 flow control instead of filling memory), writes the core's
 * replies, and feeds back to the core whatever happens: every branch on what
 * the session is lies in the core.
 */
export class AgentSession {
  #state: SessionState;
  readonly #writer: StreamWriter<ControlMessage>;
  readonly #stopReading = new AbortController();
  readonly #pipeline: OrderedPipeline<string | undefined>;
  readonly #timers: CoreTimers;
  readonly #report: SessionReport;
  #reader: AgentReader | undefined;
  #graceTimer: NodeJS.Timeout | undefined;
  readonly #finished: Promise<void>;
  #markFinished!: () => void;

  constructor(
    private readonly host: SessionHost,
    private readonly ctx: HandlerContext,
  ) {
    const cfg = host.config;
    this.#state = initialState(
      coreConfigOf(cfg),
      ctx.values.get(peerKey),
      randomUUID(),
      ctx.values.get(remoteAddressKey),
    );
    this.#writer = new StreamWriter(cfg.sendQueueMax);
    this.#pipeline = new OrderedPipeline(
      host.publisher,
      cfg.streamWindow,
      this.#stopReading.signal,
      (err) =>
        this.#feed({
          kind: "log-failed",
          unavailable: isLogError(err, "unavailable"),
          detail: (err as Error).message,
        }),
      // The token of an event is the message id its ack names, if the agent gets one.
      (ackId, a) =>
        void (ackId !== undefined && this.#feed({ kind: "stored", messageId: ackId, seq: a.seq })),
    );
    this.#timers = new CoreTimers(
      (input) => this.#feed(input),
      cfg.ackDelayMs,
      () => usageFlushDelayMs(this.#state, performance.now()),
    );
    this.#report = new SessionReport(host.logger, host.metrics);
    this.#finished = new Promise((resolve) => {
      this.#markFinished = () => {
        this.#reader?.dispose();
        this.#timers.clear();
        resolve();
      };
    });
  }

  /** Stream sequence of the session-opened event (0 until it is stored). */
  get openedSeq(): number {
    return this.#state.openedSeq;
  }

  /** The node the stream registered as ("" until its Register was read). */
  get nodeId(): string {
    return this.#state.nodeId;
  }

  /** The session's id ("" until its Register was read). */
  get sessionId(): string {
    return this.#state.seq > 0 ? this.#state.sessionId : "";
  }

  /** Resolves once the stream has ended and its session-closed event was attempted. */
  get finished(): Promise<void> {
    return this.#finished;
  }

  get closing(): boolean {
    return this.#state.close !== undefined;
  }

  /** Why the session is ending ("" while it is not). */
  get closeDetail(): string {
    return this.#state.close?.detail ?? "";
  }

  /** Who the TLS layer says is on the other end. */
  get peer(): PeerIdentity {
    return this.#state.peer;
  }

  /** The agent's address, host:port. */
  get remoteAddress(): string {
    return this.#state.remoteAddress;
  }

  /** The agent process's instance_id ("" when it sent none). */
  get instanceId(): string {
    return this.#state.instanceId;
  }

  get silentForMs(): number {
    return this.#reader?.silentForMs ?? 0;
  }

  /** Longest gap between two agent messages; undefined before the second. */
  get longestGapMs(): number | undefined {
    return this.#reader?.longestGapMs;
  }

  /** The handler of one Connect call: yields what is sent to the agent. */
  async *run(requests: AsyncIterable<AgentMessage>): AsyncGenerator<ControlMessage> {
    const reader = new AgentReader(
      requests[Symbol.asyncIterator](),
      this.#stopReading.signal,
      this.ctx.signal,
      () => this.host.draining,
    );
    this.#reader = reader;
    const onAbort = () => this.#feed({ kind: "disconnected" });
    this.ctx.signal.addEventListener("abort", onAbort, { once: true });
    try {
      await this.#open(reader);
      const close = this.#state.close;
      if (close?.kind === "refused") {
        this.#report.refused(close, this.nodeId, this.ctx.signal.aborted);
        this.#markFinished();
        yield* this.#writer; // a Reconnect the core queued, if any
        throw new ConnectError(close.detail, close.code);
      }
      this.host.metrics.openStreams.inc();
      this.host.hold(this);
      const reading = this.#readLoop(reader);
      try {
        for await (const m of this.#writer) yield m;
      } finally {
        // The stream may end without a close (the client went away mid-write).
        this.#feed({ kind: "disconnected" });
        await reading;
        // The last usage reading, written at the close, comes before the session-closed event.
        await this.#pipeline.settled();
        this.host.release(this);
        this.host.metrics.openStreams.dec();
        await this.#appendClosed();
        clearTimeout(this.#graceTimer);
        this.#markFinished();
      }
    } finally {
      this.ctx.signal.removeEventListener("abort", onAbort);
    }
  }

  /**
   * Queues a message for the agent. A full queue means the agent stopped
   * reading: it is disconnected (SLOW_CONSUMER) rather than buffered for.
   */
  send(msg: ControlMessage): boolean {
    return this.deliver(msg) === "queued";
  }

  /** `send`, saying why a message was not queued: the queue was full, or the stream is ending. */
  deliver(msg: ControlMessage): PushResult {
    const r = this.#writer.push(msg);
    if (r === "full") this.#feed({ kind: "send-queue-full", behind: this.#writer.length });
    return r;
  }

  /** A newer session for this node opened (here or on another gateway). */
  supersede(byGateway: string): void {
    this.#feed({ kind: "superseded", byGateway });
  }

  /** The gateway is draining: tell the agent to reconnect elsewhere, then end the stream. */
  reconnect(reason: string, retryAfterMs: number): void {
    this.#feed({ kind: "drain", reason, retryAfterMs });
  }

  /** Ends the stream now, whatever it is doing (drain deadline). */
  abort(detail: string): void {
    this.#feed({ kind: "drain-deadline", detail });
    this.#writer.fail(new ConnectError(detail, Code.Unavailable));
    this.ctx.values.get(resetKey)();
  }

  /** The agent's identity was revoked: the stream ends with PermissionDenied. */
  revoke(detail: string): void {
    this.#feed({ kind: "close", close: { kind: "revoked", detail } });
  }

  /** Closes the session from outside (the reconciler expired it, the gateway lost the log). */
  close(close: Close): void {
    this.#feed({ kind: "close", close });
  }

  /** Hands `input` to the core and carries out what it decided, in the order it gave. */
  #feed(input: Input): StepResult {
    const r = step(this.#state, input);
    this.#state = r.state;
    // Indexed loops: runs several times per message; a for-of may allocate per item.
    for (let i = 0; i < r.notes.length; i++) {
      const n = r.notes[i]!;
      if (n.kind === "engine-log") this.host.engineLog?.(this, n.chunk);
      else this.#report.note(n, r.state);
    }
    for (let i = 0; i < r.replies.length; i++) this.#reply(r.replies[i]!);
    for (let i = 0; i < r.timers.length; i++) this.#timers.start(r.timers[i]!);
    for (let i = 0; i < r.events.length; i++) {
      const e = r.events[i]!;
      try {
        this.#pipeline.push(gatewayEvent(this.host.config.id, e.id, e.body), e.ackId);
      } catch {
        // A failed pipeline closed the session already (its onFail): nothing to do here.
      }
    }
    if (r.close) this.#closed(r.close);
    return r;
  }

  #reply(reply: Reply): void {
    switch (reply.kind) {
      case "ack":
        if (this.send(reply.message)) this.host.metrics.ackQueued();
        return;
      case "cumulative-ack": {
        // An ack still waiting in the send queue is replaced rather than followed.
        const r = this.#writer.pushReplacingLast(reply.message, isOkAck);
        if (r === "replaced") this.host.metrics.ackCoalesced();
        else if (r === "queued") this.host.metrics.ackQueued();
        else if (r === "full") this.#feed({ kind: "send-queue-full", behind: this.#writer.length });
        return;
      }
      case "register-ack":
      case "reconnect":
        this.#writer.push(reply.message);
        return;
      default: {
        const never: never = reply.kind;
        throw new Error(`unknown reply ${String(never)}`);
      }
    }
  }

  /** The core closed the session: stop reading and end the stream with the close's code. */
  #closed(close: Close): void {
    this.#stopReading.abort();
    this.#timers.clear();
    this.#report.closing(close);
    // A refused stream ends in the handler, after what the core queued for it.
    if (close.kind === "refused") {
      this.#writer.end();
      return;
    }
    const { code, dropsQueued } = closeOutcome(close);
    this.#writer.close(code === undefined ? undefined : new ConnectError(close.detail, code), dropsQueued);
    // The last write may be stuck behind flow control of an agent that stopped reading.
    this.#graceTimer = setTimeout(() => this.ctx.values.get(resetKey)(), CLOSE_GRACE_MS);
    this.#graceTimer.unref();
  }

  /**
   * Reads the Register and, once the core has it, asks the gateway to admit
   * the stream; returns when the session is open or the stream refused.
   */
  async #open(reader: AgentReader): Promise<void> {
    this.#feed((await reader.read(readDeadlineMs(this.#state))) ?? { kind: "stream-ended" });
    if (awaitsAdmission(this.#state)) {
      const kept = this.host.admit(this);
      this.#feed(kept ? { kind: "close", close: { kind: "refused", ...kept } } : { kind: "admitted" });
    }
    // The session-opened event is stored (or failed) once the pipeline settles.
    await this.#pipeline.settled();
  }

  async #readLoop(reader: AgentReader): Promise<void> {
    try {
      for (;;) {
        // A full pipeline stops the reading (the log slows the agent down).
        const room = this.#pipeline.whenRoom();
        if (room) await room;
        // Messages the transport already holds are taken as they are; only an empty queue is waited on.
        const input = reader.takeWaiting() ?? (await reader.read(readDeadlineMs(this.#state)));
        if (input === undefined) return; // the session stopped reading
        // Done sending, not done listening: acks of what it sent last still reach it.
        if (input.kind === "stream-ended") await this.#pipeline.settled();
        if (this.#feed(input).close) return;
      }
    } finally {
      // The session-closed event comes after everything the session published.
      await this.#pipeline.settled();
    }
  }

  async #appendClosed(): Promise<void> {
    const { draft, reason, appendLimitMs } = closedEvent(this.#state);
    const label = SessionClosed_Reason[reason] ?? String(reason);
    this.host.metrics.disconnects.inc({ reason: label });
    try {
      const event = gatewayEvent(this.host.config.id, draft.id, draft.body);
      await this.host.publisher.append(event, { limitMs: appendLimitMs });
    } catch (err) {
      // The lease, and the reconciler's expiry of this gateway's sessions,
      // cover a close the log never heard of.
      this.#report.logger.warn({ err: (err as Error).message }, "session-closed event not appended");
    }
    this.#report.logger.info({ reason: label, detail: this.closeDetail }, "session closed");
  }
}
