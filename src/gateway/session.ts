import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import type { Logger } from "pino";
import {
  type AgentMessage,
  type ControlMessage,
  ControlMessageSchema,
  type Register,
} from "../gen/llmgw/v1/agent_pb.js";
import { type Event, SessionClosed_Reason } from "../gen/llmgw/v1/events_pb.js";
import { invalidNodeIdReason, isLogError } from "../log/index.js";
import type { GatewayConfig } from "./config.js";
import { gatewayEvent, sessionClosed, sessionEventId, sessionOpened } from "./events.js";
import { peerKey, resetKey } from "./identity.js";
import type { GatewayMetrics } from "./metrics.js";
import { OrderedPipeline } from "./ordered.js";
import type { Publisher } from "./publisher.js";
import {
  commandResultProblem,
  heartbeatProblem,
  registrationProblem,
  shardStatusProblem,
} from "./registration.js";
import { UsageTracker } from "./usage.js";
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
}

interface Closing {
  reason: SessionClosed_Reason;
  detail: string;
  /** Ends the stream with this error; without one it ends OK after what is queued. */
  error: ConnectError | undefined;
}

/** Pending reads are abandoned with this when the session stops reading. */
const STOPPED = Symbol("stopped");
/** How long a closing stream may take to finish on its own before it is reset. */
const CLOSE_GRACE_MS = 2_000;

/**
 * One agent stream, from the Register to the session-closed event
 * (docs/ARCHITECTURE.md, "Gateway"). The handler's generator writes what the session's writer
 * holds; a reader task turns agent messages into events and publishes them
 * through the session's ordered pipeline: several in flight, stored and
 * acknowledged in the order the agent sent them, and a full pipeline stops
 * the reading, so a slow log slows the agent (HTTP/2 flow control) instead
 * of filling memory.
 */
export class AgentSession {
  nodeId = "";
  sessionId = "";
  /** Stream sequence of the session-opened event. */
  openedSeq = 0;
  readonly #writer: StreamWriter<ControlMessage>;
  readonly #stopReading = new AbortController();
  readonly #pipeline: OrderedPipeline;
  #closing: Closing | undefined;
  #seq = 0;
  #usage: UsageTracker | undefined;
  /** The agent registered with cumulative_acks: acks waiting to be written may be merged. */
  #cumulativeAcks = false;
  /** The newest stored message not yet acknowledged to a cumulative-ack agent. */
  #ackThrough: string | undefined;
  #ackScheduled = false;
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
  #readTimeout: (() => ConnectError) | undefined;
  #interruptRead: ((err: unknown) => void) | undefined;
  #logger: Logger;
  readonly #finished: Promise<void>;
  #markFinished!: () => void;

  constructor(
    private readonly host: SessionHost,
    private readonly ctx: HandlerContext,
  ) {
    this.#writer = new StreamWriter(host.config.sendQueueMax);
    this.#pipeline = new OrderedPipeline(
      host.publisher,
      host.config.streamWindow,
      this.#stopReading.signal,
      (err) => this.#logFailed(err),
    );
    this.#logger = host.logger;
    this.#finished = new Promise((resolve) => {
      this.#markFinished = () => {
        clearTimeout(this.#readTimer);
        resolve();
      };
    });
    this.#stopReading.signal.addEventListener("abort", () => this.#interruptRead?.(STOPPED), { once: true });
  }

  /** Resolves once the stream has ended and its session-closed event was attempted. */
  get finished(): Promise<void> {
    return this.#finished;
  }

  get closing(): boolean {
    return this.#closing !== undefined;
  }

  /** The handler of one Connect call: yields what is sent to the agent. */
  async *run(requests: AsyncIterable<AgentMessage>): AsyncGenerator<ControlMessage> {
    const it = requests[Symbol.asyncIterator]();
    try {
      await this.#open(it);
    } catch (err) {
      const ce = ConnectError.from(err);
      this.host.metrics.rejected.inc({ code: Code[ce.code] });
      this.#logger.info(
        { code: Code[ce.code], err: ce.rawMessage, node: this.nodeId || undefined },
        "stream refused",
      );
      this.#markFinished();
      throw ce;
    }
    const onAbort = () => this.close(SessionClosed_Reason.DISCONNECTED, "the connection ended", undefined);
    this.ctx.signal.addEventListener("abort", onAbort, { once: true });
    this.host.metrics.openStreams.inc();
    this.host.hold(this);
    const reading = this.#readLoop(it);
    try {
      for await (const m of this.#writer) yield m;
    } finally {
      this.ctx.signal.removeEventListener("abort", onAbort);
      // The stream may end without close() (the client went away mid-write).
      this.close(SessionClosed_Reason.DISCONNECTED, "the connection ended", undefined);
      await reading;
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
    if (r === "full") this.#slowConsumer();
    return r;
  }

  /** Why the session is ending ("" while it is not). */
  get closeDetail(): string {
    return this.#closing?.detail ?? "";
  }

  #slowConsumer(): void {
    const detail = `the agent is ${this.#writer.length} messages behind (send queue full); disconnected`;
    this.close(SessionClosed_Reason.SLOW_CONSUMER, detail, new ConnectError(detail, Code.ResourceExhausted));
  }

  /** A newer session for this node opened (here or on another gateway). */
  supersede(byGateway: string): void {
    const detail = `superseded by a newer session on gateway ${byGateway}`;
    this.close(SessionClosed_Reason.SUPERSEDED, detail, new ConnectError(detail, Code.Aborted));
  }

  /** The gateway is draining: tell the agent to reconnect elsewhere, then end the stream. */
  reconnect(reason: string, retryAfterMs: number): void {
    if (this.#closing) return;
    this.#writer.push(
      create(ControlMessageSchema, { msg: { case: "reconnect", value: { reason, retryAfterMs } } }),
    );
    this.close(SessionClosed_Reason.GATEWAY_DRAINING, reason, undefined);
  }

  /** Ends the stream now, whatever it is doing (drain deadline). */
  abort(detail: string): void {
    this.close(SessionClosed_Reason.GATEWAY_DRAINING, detail, new ConnectError(detail, Code.Unavailable));
    this.#writer.fail(new ConnectError(detail, Code.Unavailable));
    this.ctx.values.get(resetKey)();
  }

  close(reason: SessionClosed_Reason, detail: string, error: ConnectError | undefined): void {
    if (this.#closing) return;
    this.#closing = { reason, detail, error };
    this.#stopReading.abort();
    if (error) this.#writer.fail(error);
    else {
      this.#flushAck(); // what is stored is acknowledged before the stream ends
      this.#writer.end();
    }
    // The last write may be stuck behind flow control of an agent that stopped reading.
    this.#graceTimer = setTimeout(() => this.ctx.values.get(resetKey)(), CLOSE_GRACE_MS);
    this.#graceTimer.unref();
  }

  async #open(it: AsyncIterator<AgentMessage>): Promise<void> {
    const cfg = this.host.config;
    const first = await this.#receive(it, cfg.registrationTimeoutMs, () => {
      return new ConnectError(
        `no Register within ${cfg.registrationTimeoutMs} ms of opening the stream`,
        Code.DeadlineExceeded,
      );
    });
    if (first.done) {
      throw new ConnectError("the stream ended before a Register", Code.InvalidArgument);
    }
    const msg = first.value.msg;
    if (msg.case !== "register") {
      throw new ConnectError(
        `the first message must be a Register, got ${msg.case ?? "an empty message"}`,
        Code.InvalidArgument,
      );
    }
    const reg = msg.value;
    const bad = invalidNodeIdReason(reg.nodeId, "node_id");
    if (bad) throw new ConnectError(bad, Code.InvalidArgument);
    const identity = this.#identify(reg.nodeId);
    this.nodeId = reg.nodeId;
    checkRegistration(reg);
    if (this.host.draining) {
      throw new ConnectError(`gateway ${cfg.id} is draining; connect to another gateway`, Code.Unavailable);
    }

    this.#cumulativeAcks = reg.cumulativeAcks;
    this.sessionId = randomUUID();
    this.#logger = this.host.logger.child({ node: this.nodeId, session: this.sessionId });
    this.#seq = 1;
    this.#usage = new UsageTracker(cfg.usageThresholdMb, reg);
    try {
      const r = await this.host.publisher.append(sessionOpened(cfg.id, this.sessionId, reg, identity), {
        signal: this.ctx.signal,
      });
      this.openedSeq = r.seq;
    } catch (err) {
      throw new ConnectError(
        `the log did not take the session; retry (possibly on another gateway): ${(err as Error).message}`,
        Code.Unavailable,
        undefined,
        undefined,
        err,
      );
    }
    this.#writer.push(ack("register", this.sessionId));
    this.#logger.info(
      { gpus: reg.gpus.length, runningShards: reg.runningShards.length, identity, seq: this.openedSeq },
      "session opened",
    );
  }

  /** The certificate decides who the agent is, not the message. */
  #identify(nodeId: string): "mtls" | "insecure-dev" {
    const peer = this.ctx.values.get(peerKey);
    switch (peer.kind) {
      case "plaintext":
        if (this.host.config.insecureDev) return "insecure-dev";
        throw new ConnectError("no TLS: the agent's identity cannot be verified", Code.Unauthenticated);
      case "none":
        throw new ConnectError(
          "no client certificate: an agent must present a certificate signed by the client CA whose CN is its node_id",
          Code.Unauthenticated,
        );
      case "unverified":
        throw new ConnectError(
          `client certificate${peer.commonName ? ` (CN ${JSON.stringify(peer.commonName)})` : ""} did not verify: ${peer.reason}`,
          Code.Unauthenticated,
        );
      case "verified":
        if (peer.commonName !== nodeId) {
          throw new ConnectError(
            `certificate authorizes node ${JSON.stringify(peer.commonName)}, not ${JSON.stringify(nodeId)}`,
            Code.PermissionDenied,
          );
        }
        return "mtls";
      default: {
        const never: never = peer;
        throw new ConnectError(`unknown peer identity ${JSON.stringify(never)}`, Code.Internal);
      }
    }
  }

  async #readLoop(it: AsyncIterator<AgentMessage>): Promise<void> {
    try {
      await this.#readMessages(it);
    } finally {
      // The session-closed event comes after everything the session published.
      await this.#pipeline.settled();
    }
  }

  /** The log did not take one of the session's events: the stream cannot go on. */
  #logFailed(err: unknown): void {
    if (this.#stopReading.signal.aborted) return;
    const detail = `the log did not take the agent's message: ${(err as Error).message}`;
    if (isLogError(err, "unavailable")) {
      this.close(SessionClosed_Reason.LOG_UNAVAILABLE, detail, new ConnectError(detail, Code.Unavailable));
    } else {
      this.close(SessionClosed_Reason.PROTOCOL_ERROR, detail, new ConnectError(detail, Code.Internal));
    }
  }

  async #readMessages(it: AsyncIterator<AgentMessage>): Promise<void> {
    const cfg = this.host.config;
    const silent = () =>
      new ConnectError(
        `no message within the heartbeat timeout (${cfg.heartbeatTimeoutMs} ms)`,
        Code.DeadlineExceeded,
      );
    for (;;) {
      let r: IteratorResult<AgentMessage>;
      try {
        r = await this.#receive(it, cfg.heartbeatTimeoutMs, silent);
      } catch (err) {
        if (err === STOPPED) return;
        const ce = ConnectError.from(err);
        if (ce.code === Code.DeadlineExceeded && ce.rawMessage.startsWith("no message within")) {
          this.close(SessionClosed_Reason.SILENT, ce.rawMessage, ce);
        } else if (this.ctx.signal.aborted || !isProtocolError(ce)) {
          this.close(SessionClosed_Reason.DISCONNECTED, `the stream failed: ${ce.rawMessage}`, undefined);
        } else {
          this.close(SessionClosed_Reason.PROTOCOL_ERROR, ce.rawMessage, ce);
        }
        return;
      }
      if (r.done) {
        // The agent is done sending, not done listening: the acks of what
        // it sent last still reach it before the stream ends.
        await this.#pipeline.settled();
        this.close(SessionClosed_Reason.DISCONNECTED, "the agent closed the stream", undefined);
        return;
      }
      this.#seq++;
      let out: { event?: Event; acked: boolean };
      try {
        out = this.#eventFor(r.value, this.#seq);
      } catch (err) {
        const ce = ConnectError.from(err);
        this.close(SessionClosed_Reason.PROTOCOL_ERROR, ce.rawMessage, ce);
        return;
      }
      if (out.event) {
        const messageId = String(this.#seq);
        const onStored = out.acked ? () => this.#ack(messageId) : () => {};
        try {
          const waiting = this.#pipeline.push(out.event, onStored);
          if (waiting) await waiting;
        } catch {
          return; // the pipeline's failure already closed the session
        }
      }
    }
  }

  /**
   * Acknowledges a stored message. For an agent that takes acks as
   * cumulative, the ack waits for the end of the event loop's turn: the
   * log's acks arrive in batches, and every message stored in the same turn
   * is then answered by one write. An ack still waiting in the send queue
   * is replaced rather than followed, too.
   */
  #ack(messageId: string): void {
    if (!this.#cumulativeAcks) {
      if (this.send(ack(messageId))) this.host.metrics.acksQueued.inc();
      return;
    }
    if (this.#ackThrough !== undefined) this.host.metrics.acksCoalesced.inc();
    this.#ackThrough = messageId;
    if (!this.#ackScheduled) {
      this.#ackScheduled = true;
      setImmediate(this.#flushAck);
    }
  }

  /** Queues the cumulative ack waiting for the end of the turn, if any. */
  readonly #flushAck = (): void => {
    this.#ackScheduled = false;
    const id = this.#ackThrough;
    if (id === undefined) return;
    this.#ackThrough = undefined;
    const r = this.#writer.pushReplacingLast(ack(id), isOkAck);
    if (r === "replaced") this.host.metrics.acksCoalesced.inc();
    else if (r === "queued") this.host.metrics.acksQueued.inc();
    else if (r === "full") this.#slowConsumer();
  };

  /** The event a message becomes (if any) and whether the agent gets an ack for it. */
  #eventFor(m: AgentMessage, seq: number): { event?: Event; acked: boolean } {
    const gw = this.host.config.id;
    const id = sessionEventId(this.sessionId, seq);
    const at = { nodeId: this.nodeId, sessionId: this.sessionId, sessionSeq: BigInt(seq) };
    const msg = m.msg;
    switch (msg.case) {
      case "register":
        this.#checkReregistration(msg.value);
        checkRegistration(msg.value);
        this.#usage?.reset(msg.value);
        return {
          event: gatewayEvent(gw, id, { case: "hardwareChanged", value: { ...at, registration: msg.value } }),
          acked: true,
        };
      case "heartbeat": {
        const bad = heartbeatProblem(msg.value);
        if (bad) throw new ConnectError(`invalid heartbeat: ${bad}`, Code.InvalidArgument);
        const seen = this.#usage?.observe(msg.value);
        if (seen && seen.unknownGpu.length > 0) {
          this.#logger.warn(
            { gpus: [...new Set(seen.unknownGpu.map((p) => p.gpuIndex))] },
            "heartbeat.gpu_problems names GPUs the registration does not list; dropped",
          );
        }
        if (!seen?.record) return { acked: false };
        const value = {
          ...at,
          gpuMemoryUsedMb: msg.value.gpuMemoryUsedMb,
          newProblems: msg.value.newProblems,
          gpuProblems: seen.gpuProblems,
        };
        return { event: gatewayEvent(gw, id, { case: "usageChanged", value }), acked: false };
      }
      case "shard": {
        const bad = shardStatusProblem(msg.value);
        if (bad) throw new ConnectError(`invalid shard status: ${bad}`, Code.InvalidArgument);
        return {
          event: gatewayEvent(gw, id, { case: "shardStatus", value: { ...at, status: msg.value } }),
          acked: true,
        };
      }
      case "result": {
        const bad = commandResultProblem(msg.value);
        if (bad) throw new ConnectError(`invalid command result: ${bad}`, Code.InvalidArgument);
        return {
          event: gatewayEvent(gw, id, { case: "commandResult", value: { ...at, result: msg.value } }),
          acked: true,
        };
      }
      case undefined:
        // A kind this gateway does not know (a newer agent) or an empty
        // message: it keeps the session alive but is not recorded.
        this.#logger.debug({ seq }, "message of an unknown kind ignored");
        return { acked: false };
      default: {
        const never: never = msg;
        throw new ConnectError(`unknown agent message ${JSON.stringify(never)}`, Code.Internal);
      }
    }
  }

  #checkReregistration(reg: Register): void {
    if (reg.nodeId !== this.nodeId) {
      throw new ConnectError(
        `re-registration names node ${JSON.stringify(reg.nodeId)} but this stream is node ${JSON.stringify(this.nodeId)}`,
        Code.InvalidArgument,
      );
    }
  }

  /**
   * The next agent message, or a rejection: `timeout()` when nothing came
   * within `timeoutMs`, STOPPED when the session stopped reading.
   */
  #receive(
    it: AsyncIterator<AgentMessage>,
    timeoutMs: number,
    timeout: () => ConnectError,
  ): Promise<IteratorResult<AgentMessage>> {
    if (this.#stopReading.signal.aborted) return Promise.reject(STOPPED);
    this.#readTimeout = timeout;
    if (this.#readTimer && this.#readTimerMs === timeoutMs) {
      // Also re-arms a timer that fired while no read was in progress.
      this.#readTimer.refresh();
    } else {
      clearTimeout(this.#readTimer);
      this.#readTimerMs = timeoutMs;
      this.#readTimer = setTimeout(() => this.#interruptRead?.(this.#readTimeout?.()), timeoutMs);
      this.#readTimer.unref();
    }
    // One promise per read, settled by the read or by an interruption
    // (instead of a race of the read, a catch and an interruption promise):
    // each of them lives until the agent's next message, seconds later, so
    // they outlive young-generation collections and become old garbage.
    return new Promise<IteratorResult<AgentMessage>>((resolve, reject) => {
      const done = () => {
        if (this.#interruptRead === reject) this.#interruptRead = undefined;
      };
      this.#interruptRead = reject;
      it.next().then(
        (r) => {
          done();
          resolve(r);
        },
        (err: unknown) => {
          done();
          reject(agentFault(err));
        },
      );
    });
  }

  async #appendClosed(): Promise<void> {
    const c = this.#closing ?? {
      reason: SessionClosed_Reason.DISCONNECTED,
      detail: "the connection ended",
      error: undefined,
    };
    const label = SessionClosed_Reason[c.reason] ?? String(c.reason);
    this.host.metrics.disconnects.inc({ reason: label });
    const limitMs = c.reason === SessionClosed_Reason.LOG_UNAVAILABLE ? 1_000 : 5_000;
    try {
      await this.host.publisher.append(
        sessionClosed(this.host.config.id, this.nodeId, this.sessionId, c.reason, c.detail),
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
 * not the Internal the protocol layer reports them as.
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

/** A registration that contradicts itself is refused, never recorded (registration.ts). */
function checkRegistration(reg: Register): void {
  const bad = registrationProblem(reg);
  if (bad) throw new ConnectError(`invalid registration: ${bad}`, Code.InvalidArgument);
}

/** The registration's ack names the session, so the agent can tell which log events its acks stand for. */
function ack(messageId: string, sessionId = ""): ControlMessage {
  return create(ControlMessageSchema, { msg: { case: "ack", value: { messageId, ok: true, sessionId } } });
}

/** A plain ack of an agent message (not the registration's, which names the session). */
function isOkAck(m: ControlMessage): boolean {
  return m.msg.case === "ack" && m.msg.value.ok && m.msg.value.messageId !== "register";
}

/** Errors reading the request stream that are the agent's fault rather than a dropped connection. */
function isProtocolError(e: ConnectError): boolean {
  return [Code.ResourceExhausted, Code.InvalidArgument, Code.Internal, Code.Unimplemented].includes(e.code);
}
