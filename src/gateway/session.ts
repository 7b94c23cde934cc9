import { randomUUID } from "node:crypto";
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import type { Logger } from "pino";
import { readInto, takeWaiting } from "../async/read-into.js";
import type { AgentMessage, ControlMessage, EngineLogChunk } from "../gen/llmgw/v1/agent_pb.js";
import { SessionClosed_Reason } from "../gen/llmgw/v1/events_pb.js";
import { isLogError } from "../log/index.js";
import type { GatewayConfig } from "./config.js";
import { gatewayEvent, sessionClosed } from "./events.js";
import { type PeerIdentity, peerKey, remoteAddressKey, resetKey } from "./identity.js";
import type { GatewayMetrics } from "./metrics.js";
import { OrderedPipeline } from "./ordered.js";
import type { Publisher } from "./publisher.js";
import {
  type Close,
  closeOutcome,
  type EventDraft,
  type Input,
  initialState,
  isOkAck,
  readDeadlineMs,
  reconnect,
  type SessionState,
  type StepResult,
  step,
  usageFlushDelayMs,
} from "./session-core/index.js";
import { type PushResult, StreamWriter } from "./writer.js";

/** What a session needs from its gateway. */
export interface SessionHost {
  readonly config: GatewayConfig;
  readonly publisher: Publisher;
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  readonly draining: boolean;
  /** The session is in the log: route commands to it (and close it at once if it is already superseded). */
  hold(session: AgentSession): void;
  /** The session ended: route nothing more to it. */
  release(session: AgentSession): void;
  /**
   * Asked once the Register is read, before the session opens: a refusal
   * keeps the stream out (a revoked identity, a second agent with the
   * identity of a live session). With `retryAfterMs` the agent is told to
   * reconnect after that long before the stream ends with `code`.
   */
  admit(session: AgentSession): Refusal | undefined;
  /** Engine output the agent sent for a log request (engine-logs/bridge.ts); absent: dropped. */
  engineLog?(session: AgentSession, chunk: EngineLogChunk): void;
}

/** Why a stream is kept out at registration. */
export interface Refusal {
  code: Code;
  detail: string;
  retryAfterMs?: number;
}

/** Pending reads are abandoned with this when the session stops reading. */
const STOPPED = Symbol("stopped");
/** A pending read is abandoned with this when the read deadline passes. */
const TIMED_OUT = Symbol("timed out");
/** How long a closing stream may take to finish on its own before it is reset. */
const CLOSE_GRACE_MS = 2_000;

/**
 * One agent stream, from the Register to the session-closed event
 * (docs/ARCHITECTURE.md, "Gateway"). What the session decides is the pure
 * session core's (`session-core/`, `step`); this shell only does what the
 * core cannot: it reads the request iterator, runs the timers, publishes the
 * core's events and writes its replies. The handler's generator writes what
 * the session's writer holds; a reader task feeds agent messages to the core
 * and publishes the events through the session's ordered pipeline: several
 * in flight, stored and acknowledged in the order the agent sent them, and a
 * full pipeline stops the reading, so a slow log slows the agent (HTTP/2
 * flow control) instead of filling memory.
 */
export class AgentSession {
  /** Stream sequence of the session-opened event. */
  openedSeq = 0;
  #state: SessionState;
  readonly #writer: StreamWriter<ControlMessage>;
  readonly #stopReading = new AbortController();
  readonly #pipeline: OrderedPipeline<string | undefined>;
  #graceTimer: NodeJS.Timeout | undefined;
  /**
   * One timer per session for the read deadline, refreshed at every read,
   * and one way to interrupt the read in progress. A timer, a listener and
   * a promise per message lived from one heartbeat to the next, so with
   * thousands of streams they survived the young-generation collections and
   * made each of them slow (the command delivery tail of the fan-in bench).
   */
  #readTimer: NodeJS.Timeout | undefined;
  #readTimerMs = 0;
  /** Settles the read in progress (undefined when none is). */
  #settleRead: ((input: Input | undefined) => void) | undefined;
  /** Reads of the iterator whose read was interrupted: their answers come to nobody. */
  #orphanReads = 0;
  /** The end of the usage interval (the core's `usage-flush` timer). */
  #usageTimer: NodeJS.Timeout | undefined;
  /** The core's `ack-later` timer. */
  #ackTimer: NodeJS.Timeout | undefined;
  /**
   * Events queued or in flight that the agent is acked for once stored: what
   * a `stored` input says is still on its way. (A usage event is acked for
   * nothing, so an ack need not wait for it.)
   */
  #ackedOnTheWay = 0;
  #logger: Logger;
  /** The registration's instance_id: which agent process this is. */
  #instanceId = "";
  /** When the last agent message came (monotonic ms), and the longest gap between two so far. */
  #lastMessageAt = performance.now();
  #messages = 0;
  #longestGapMs = 0;
  readonly #finished: Promise<void>;
  #markFinished!: () => void;

  constructor(
    private readonly host: SessionHost,
    private readonly ctx: HandlerContext,
  ) {
    const cfg = host.config;
    this.#state = initialState(
      {
        gatewayId: cfg.id,
        insecureDev: cfg.insecureDev,
        usageThresholdMb: cfg.usageThresholdMb,
        registrationTimeoutMs: cfg.registrationTimeoutMs,
        heartbeatTimeoutMs: cfg.heartbeatTimeoutMs,
        usageIntervalMs: cfg.usageIntervalMs,
        eventBudget: { perMinute: cfg.eventBudgetPerMinute, burst: cfg.eventBudgetBurst },
        byteBudget: { perMinute: cfg.byteBudgetPerMinute, burst: cfg.byteBudgetBurst },
        textCaps: { outputChars: cfg.maxOutputChars, textChars: cfg.maxTextChars },
        ackEvery: cfg.ackEvery,
        ackDelayMs: cfg.ackDelayMs,
      },
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
      (ackId) => {
        if (ackId === undefined) return;
        this.#ackedOnTheWay--;
        this.#feed({ kind: "stored", messageId: ackId, behind: this.#ackedOnTheWay });
      },
    );
    this.#logger = host.logger;
    this.#finished = new Promise((resolve) => {
      this.#markFinished = () => {
        clearTimeout(this.#readTimer);
        clearTimeout(this.#usageTimer);
        clearTimeout(this.#ackTimer);
        resolve();
      };
    });
    this.#stopReading.signal.addEventListener("abort", () => this.#interruptRead(STOPPED), { once: true });
  }

  /** The node the stream registered as ("" until its Register was read). */
  get nodeId(): string {
    return this.#state.nodeId;
  }

  /** The session's id ("" until it opened). */
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
    return this.#instanceId;
  }

  get silentForMs(): number {
    return performance.now() - this.#lastMessageAt;
  }

  /** Longest gap between two agent messages; undefined before the second. */
  get longestGapMs(): number | undefined {
    return this.#messages >= 2 ? this.#longestGapMs : undefined;
  }

  /** The handler of one Connect call: yields what is sent to the agent. */
  async *run(requests: AsyncIterable<AgentMessage>): AsyncGenerator<ControlMessage> {
    const it = requests[Symbol.asyncIterator]();
    const refused = await this.#open(it);
    if (refused) {
      const ce = new ConnectError(refused.detail, refused.code);
      this.host.metrics.rejected.inc({ code: Code[ce.code] });
      // A client that reset its own stream is gone: a line per reset would let
      // a rapid-reset flood write the gateway's log at its pace (the metric counts them).
      const level = this.ctx.signal.aborted ? "debug" : "info";
      this.#logger[level](
        { code: Code[ce.code], err: ce.rawMessage, node: this.nodeId || undefined },
        "stream refused",
      );
      this.#markFinished();
      // The agent backs off for what it is told, not for its own schedule.
      if (refused.retryAfterMs !== undefined) yield reconnect(refused.detail, refused.retryAfterMs);
      throw ce;
    }
    const onAbort = () => this.#feed({ kind: "disconnected" });
    this.ctx.signal.addEventListener("abort", onAbort, { once: true });
    this.host.metrics.openStreams.inc();
    this.host.hold(this);
    const reading = this.#readLoop(it);
    try {
      for await (const m of this.#writer) yield m;
    } finally {
      this.ctx.signal.removeEventListener("abort", onAbort);
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

  /** Why the session is ending ("" while it is not). */
  get closeDetail(): string {
    return this.#state.close?.detail ?? "";
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

  /**
   * Hands `input` to the core and carries out what it decided. Its events
   * are published in order (the session-opened event excepted: `#open`
   * publishes it and waits for it); the reader waits for the pipeline's room.
   */
  #feed(input: Input): StepResult {
    const opening = this.#state.phase === "registering";
    const r = step(this.#state, input);
    this.#state = r.state;
    // Indexed loops: this runs several times per agent message, and a for-of
    // that the optimiser leaves alone allocates an iterator result per item.
    for (let i = 0; i < r.notes.length; i++) this.#note(r.notes[i]!);
    for (let i = 0; i < r.replies.length; i++) this.#reply(r.replies[i]!);
    for (let i = 0; i < r.timers.length; i++) {
      const t = r.timers[i];
      // The log's acks arrive in batches: one flush at the end of the event loop's turn.
      if (t === "ack-flush") setImmediate(this.#flushAck);
      else if (t === "ack-later") this.#startAckTimer();
      else if (t === "usage-flush") this.#startUsageTimer();
    }
    if (!opening) for (let i = 0; i < r.events.length; i++) this.#publish(r.events[i]!);
    if (r.close) this.#closed(r.close);
    return r;
  }

  readonly #flushAck = (): void => {
    // The flush writes what an `ack-later` timer was waiting for too.
    clearTimeout(this.#ackTimer);
    this.#feed({ kind: "timer", timer: "ack-flush" });
  };

  readonly #flushAckLater = (): void => void this.#feed({ kind: "timer", timer: "ack-later" });

  #startAckTimer(): void {
    clearTimeout(this.#ackTimer);
    this.#ackTimer = setTimeout(this.#flushAckLater, this.host.config.ackDelayMs);
    this.#ackTimer.unref();
  }

  #startUsageTimer(): void {
    clearTimeout(this.#usageTimer);
    this.#usageTimer = setTimeout(
      () => this.#feed({ kind: "timer", timer: "usage-flush" }),
      usageFlushDelayMs(this.#state, performance.now()),
    );
    this.#usageTimer.unref();
  }

  /**
   * Publishes `e` after every event the session published before it (the
   * pipeline queues it; the reader waits for room before it reads on).
   */
  #publish(e: EventDraft): void {
    try {
      this.#pipeline.push(gatewayEvent(this.host.config.id, e.id, e.body), e.ackId);
      if (e.ackId !== undefined) this.#ackedOnTheWay++;
    } catch {
      // A failed pipeline closed the session already (its onFail): nothing to do here.
    }
  }

  #note(n: StepResult["notes"][number]): void {
    switch (n.kind) {
      case "opened":
        this.#logger = this.host.logger.child({ node: this.nodeId, session: this.sessionId });
        return;
      case "ack-coalesced":
        this.host.metrics.ackCoalesced();
        return;
      case "unknown-gpus":
        this.#logger.warn(
          { gpus: n.gpus },
          "heartbeat.gpu_problems names GPUs the registration does not list; dropped",
        );
        return;
      case "unknown-message":
        this.#logger.debug({ seq: n.seq }, "message of an unknown kind ignored");
        return;
      case "usage-coalesced":
        this.host.metrics.usageCoalesced.inc();
        return;
      case "text-truncated":
        for (const field of n.fields) this.host.metrics.textTruncated.inc({ field });
        this.#logger.debug({ fields: n.fields }, "free text over its cap cut with a marker");
        return;
      case "engine-log":
        this.host.engineLog?.(this, n.chunk);
        return;
      case "problems-dropped":
        this.host.metrics.problemsCoalesced.inc(n.count);
        this.#logger.warn(
          { count: n.count },
          "heartbeat problems past the bound of one usage interval's event; not recorded",
        );
        return;
      default: {
        const never: never = n;
        throw new Error(`unknown note ${JSON.stringify(never)}`);
      }
    }
  }

  #reply(reply: StepResult["replies"][number]): void {
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

  /** The core closed the session: stop reading and end the stream. */
  #closed(close: Close): void {
    this.#stopReading.abort();
    clearTimeout(this.#usageTimer);
    clearTimeout(this.#ackTimer);
    if (close.kind === "event-budget") {
      this.host.metrics.overBudget.inc();
      this.#logger.warn({ detail: close.detail }, "session over its event budget; closing it");
    }
    if (close.kind === "byte-budget") {
      this.host.metrics.overByteBudget.inc();
      this.#logger.warn({ detail: close.detail }, "session over its byte budget; closing it");
    }
    const { code } = closeOutcome(close);
    if (code === undefined) this.#writer.end();
    else this.#writer.fail(new ConnectError(close.detail, code));
    if (close.kind === "refused") return; // the handler throws; no stream to reset
    // The last write may be stuck behind flow control of an agent that stopped reading.
    this.#graceTimer = setTimeout(() => this.ctx.values.get(resetKey)(), CLOSE_GRACE_MS);
    this.#graceTimer.unref();
  }

  /**
   * Reads the Register and appends the session-opened event. Returns the
   * refusal when the stream does not become a session.
   */
  async #open(it: AsyncIterator<AgentMessage>): Promise<Refusal | undefined> {
    const first = (await this.#read(it)) ?? { kind: "stream-ended" };
    const r = this.#feed(first);
    if (r.close?.kind === "refused") return r.close;
    const opened = r.events[0];
    if (r.close || opened?.body.case !== "sessionOpened") {
      return { code: Code.Internal, detail: "the session core neither opened nor refused the stream" };
    }
    this.#instanceId = opened.body.value.registration?.instanceId ?? "";
    const kept = this.host.admit(this);
    if (kept) {
      this.#feed({ kind: "close", close: { kind: "refused", code: kept.code, detail: kept.detail } });
      return kept;
    }
    try {
      const event = gatewayEvent(this.host.config.id, opened.id, opened.body);
      this.openedSeq = (await this.host.publisher.append(event, { signal: this.ctx.signal })).seq;
    } catch (err) {
      const failed = this.#feed({
        kind: "log-failed",
        unavailable: isLogError(err, "unavailable"),
        detail: (err as Error).message,
      });
      return failed.close?.kind === "refused"
        ? failed.close
        : { code: Code.Unavailable, detail: this.closeDetail };
    }
    this.#feed({ kind: "stored", messageId: "register", behind: 0 });
    const { registration, identity } = opened.body.value;
    this.#logger.info(
      {
        gpus: registration?.gpus?.length ?? 0,
        runningShards: registration?.runningShards?.length ?? 0,
        identity,
        seq: this.openedSeq,
      },
      "session opened",
    );
    return undefined;
  }

  async #readLoop(it: AsyncIterator<AgentMessage>): Promise<void> {
    try {
      await this.#readMessages(it);
    } finally {
      // The session-closed event comes after everything the session published.
      await this.#pipeline.settled();
    }
  }

  async #readMessages(it: AsyncIterator<AgentMessage>): Promise<void> {
    for (;;) {
      // A full pipeline stops the reading (the log slows the agent down).
      const room = this.#pipeline.whenRoom();
      if (room) await room;
      // Messages the transport already holds are taken as they are: under
      // load they come many to a read, and a promise per message was a
      // large share of the reader's cost. Only an empty queue is waited on.
      const input = this.#takeWaiting(it) ?? (await this.#read(it));
      if (input === undefined) return; // the session stopped reading
      // The agent is done sending, not done listening: the acks of what it
      // sent last still reach it before the stream ends.
      if (input.kind === "stream-ended") await this.#pipeline.settled();
      if (this.#feed(input).close) return;
    }
  }

  /**
   * The agent's next message as the core's input: a message, the end of the
   * stream, a failed read, or the read deadline (a `timer` input) when
   * nothing came in time. Undefined when the session stopped reading.
   */
  #read(it: AsyncIterator<AgentMessage>): Promise<Input | undefined> {
    if (this.#stopReading.signal.aborted) return Promise.resolve(undefined);
    const timeoutMs = readDeadlineMs(this.#state);
    if (this.#readTimer && this.#readTimerMs === timeoutMs) {
      // Also re-arms a timer that fired while no read was in progress.
      this.#readTimer.refresh();
    } else {
      clearTimeout(this.#readTimer);
      this.#readTimerMs = timeoutMs;
      this.#readTimer = setTimeout(() => this.#interruptRead(TIMED_OUT), timeoutMs);
      this.#readTimer.unref();
    }
    // One promise per read, settled by the read or by an interruption
    // (instead of a race of the read, a catch and an interruption promise):
    // each of them lives until the agent's next message, seconds later, so
    // they outlive young-generation collections and become old garbage. The
    // handlers are the session's own, not closures made per message.
    return new Promise<Input | undefined>((resolve) => {
      this.#settleRead = resolve;
      readInto(it, this.#onRead, this.#onReadFailed);
    });
  }

  /**
   * The agent's next message if the transport holds one already, as the
   * core's input; undefined when it does not (or cannot say), and the
   * reader waits in `#read`. The read deadline's timer is not touched: if
   * it passes while no read waits, nothing happens, and the next `#read`
   * re-arms it.
   */
  #takeWaiting(it: AsyncIterator<AgentMessage>): Input | undefined {
    if (this.#stopReading.signal.aborted) return undefined;
    const m = takeWaiting(it);
    return m === undefined ? undefined : this.#heard(m);
  }

  readonly #onRead = (r: IteratorResult<AgentMessage>): void => {
    if (this.#orphaned()) return;
    this.#settle(r.done ? { kind: "stream-ended" } : this.#heard(r.value));
  };

  readonly #onReadFailed = (err: unknown): void => {
    if (this.#orphaned()) return;
    const ce = agentFault(err);
    this.#settle({
      kind: "stream-failed",
      code: ce.code,
      detail: ce.rawMessage,
      aborted: this.ctx.signal.aborted,
    });
  };

  /** The read deadline passed or the session stopped reading: the read in progress ends without its message. */
  #interruptRead(why: unknown): void {
    if (!this.#settleRead) return;
    this.#orphanReads++;
    this.#settle(why === TIMED_OUT ? { kind: "timer", timer: "read-deadline" } : undefined);
  }

  /** An answer of the iterator to a read that was interrupted. */
  #orphaned(): boolean {
    if (this.#orphanReads === 0) return false;
    this.#orphanReads--;
    return true;
  }

  #settle(input: Input | undefined): void {
    const resolve = this.#settleRead;
    this.#settleRead = undefined;
    resolve?.(input);
  }

  /**
   * An agent message came, as the core's input. Notes how recently and how
   * regularly the agent speaks (the duplicate check's liveness).
   */
  #heard(message: AgentMessage): Input {
    const now = performance.now();
    if (this.#messages > 0) this.#longestGapMs = Math.max(this.#longestGapMs, now - this.#lastMessageAt);
    this.#lastMessageAt = now;
    this.#messages++;
    return { kind: "message", message, draining: this.host.draining, at: now };
  }

  async #appendClosed(): Promise<void> {
    const c: Close = this.#state.close ?? { kind: "disconnected", detail: "the connection ended" };
    const reason = closeOutcome(c).reason ?? SessionClosed_Reason.DISCONNECTED;
    const label = SessionClosed_Reason[reason] ?? String(reason);
    this.host.metrics.disconnects.inc({ reason: label });
    const limitMs = reason === SessionClosed_Reason.LOG_UNAVAILABLE ? 1_000 : 5_000;
    try {
      await this.host.publisher.append(
        sessionClosed(this.host.config.id, this.nodeId, this.sessionId, reason, c.detail),
        { limitMs },
      );
    } catch (err) {
      // The lease, and the reconciler's expiry of this gateway's sessions,
      // cover a close the log never heard of.
      this.#logger.warn({ err: (err as Error).message }, "session-closed event not appended");
    }
    this.#logger.info({ reason: label, detail: c.detail }, "session closed");
  }
}

/**
 * Bytes the agent sent that do not decode are its fault: InvalidArgument,
 * not the Internal the protocol layer reports them as. Connect marks these
 * with no error class, code or cause of their own (its serializer throws a
 * plain Internal "parse binary: …", its envelope reader "… envelope …"), so
 * its text is the only mark there is; every other failure keeps its code.
 */
function agentFault(err: unknown): ConnectError {
  const ce = ConnectError.from(err);
  if (ce.code === Code.Internal && /^parse binary|envelope/.test(ce.rawMessage)) {
    return new ConnectError(
      `undecodable message from the agent: ${ce.rawMessage}`,
      Code.InvalidArgument,
      undefined,
      undefined,
      ce,
    );
  }
  return ce;
}
