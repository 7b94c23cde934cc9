/**
 * A simulated gateway: its agent streams run the real session core (`step`)
 * exactly as the gateway's shell feeds it (src/gateway/session.ts): every
 * message, timer, store and failure is an input, and what `step` returns is
 * carried out — events pushed into the gateway's own `OrderedPipeline`
 * (pipelined, handed back stored in the order drafted; on an unavailable
 * log the failed ones retried in order with their message ids, through the
 * gateway's own retry loop `appendRetrying`, so a publish whose ack was
 * lost is stored once by the log's message-id dedupe), replies written to
 * the stream, timers armed on the simulated clock. The pipeline runs over
 * the gateway's own `Publisher` on a connection of the process's to the
 * in-memory log, on the scheduler's clock. As the shell, a session reads no further while its
 * pipeline has no room, reads the stream's end only once what it published
 * is stored, and appends its session-closed event after that, retried as
 * the gateway retries it. Around the sessions it keeps what the gateway
 * keeps: the newest session per node through the gateway's own
 * `SessionsWatch` (supersede across gateways, fed the session, gateway and
 * reconciler records as the gateway's followers feed it), the
 * duplicate-identity check (`liveHolder`), and the gateway's own
 * `CommandRelay` (commands to the sessions it holds, undeliverable ones
 * reported with the relay's reasons, ended sessions remembered for its TTL
 * on the gateway's clock, expired sessions ended). The publisher, the watch
 * and the relay are a process's: a restarted gateway starts with new ones.
 */
import { Code } from "@connectrpc/connect";
import type { TimerHandle } from "../agent/client/index.js";
import { coreConfigOf, type GatewayConfig } from "../gateway/config.js";
import { liveHolder } from "../gateway/duplicates.js";
import { gatewayEvent, gatewayStartedEvent } from "../gateway/events.js";
import { GatewayMetrics } from "../gateway/metrics.js";
import { OrderedPipeline } from "../gateway/ordered.js";
import { Publisher } from "../gateway/publisher.js";
import { CommandRelay, type RelayLogger } from "../gateway/relay.js";
import {
  awaitsAdmission,
  type Close,
  type CoreConfig,
  closedEvent,
  closeOutcome,
  type Input,
  initialState,
  readDeadlineMs,
  type SessionState,
  step,
  usageFlushDelayMs,
} from "../gateway/session-core/index.js";
import { SessionsWatch } from "../gateway/sessions-watch.js";
import type { PushResult } from "../gateway/writer.js";
import type { AgentMessage, ControlMessage } from "../gen/llmgw/v1/agent_pb.js";
import type { Appended } from "../log/append.js";
import { isLogError } from "../log/log-error.js";
import type { MemoryLog, SimConnection, StoredRecord } from "./memory-log.js";
import { schedulerClock } from "./retry-clock.js";
import type { Scheduler } from "./scheduler.js";
import type { SimStream, StreamReceiver } from "./stream.js";

export interface SimGatewayOptions {
  /** The gateway's configuration, as `llmgw gateway` parses it (its lease TTL is the simulated lease's). */
  config: GatewayConfig;
  /** Where agents reach it on the simulated network. */
  listenAddress: string;
  scheduler: Scheduler;
  log: MemoryLog;
  newId: () => string;
}

export class SimGateway {
  readonly id: string;
  /** The process runs (it follows the log). */
  up = false;
  /** It takes agents' streams: from when the log stored its gateway-started event. */
  serving = false;
  /** This gateway's clock minus the simulation's (clock skew). */
  skewMs = 0;
  readonly #o: SimGatewayOptions;
  /** The session core's configuration, from the gateway's. */
  readonly core: CoreConfig;
  readonly #sessions = new Set<SimSession>();
  /** Open sessions by session id (the gateway's registry), and every session by node (filled once the Register is read). */
  readonly #byId = new Map<string, SimSession>();
  readonly #byNode = new Map<string, Set<SimSession>>();
  /** What one process of this gateway keeps: a restarted gateway starts with none of it. */
  #process: GatewayProcess;

  constructor(opts: SimGatewayOptions) {
    this.#o = opts;
    this.id = opts.config.id;
    this.core = coreConfigOf(opts.config);
    this.#process = this.#newProcess();
  }

  /**
   * A process's way into the log, its newest-session watch and its command
   * relay (the gateway's own `CommandRelay`, with its ended-session memory
   * and its reports written once), all new at every start.
   */
  #newProcess(): GatewayProcess {
    const c = this.#o.config;
    const connection = this.#o.log.connection();
    const publisher = new Publisher(
      { appender: connection.appender },
      { window: c.publishWindow, timeoutMs: c.publishTimeoutMs, unavailableLimitMs: c.logUnavailableLimitMs },
      simGatewayMetrics(),
      SILENT,
      schedulerClock(this.#o.scheduler),
    );
    return {
      connection,
      publisher,
      watch: new SessionsWatch({ forNode: (nodeId) => this.#byNode.get(nodeId) ?? [] }),
      relay: new CommandRelay<SimSession>(
        this.#byId,
        simGatewayMetrics(),
        SILENT,
        this.id,
        (e) => publisher.append(e),
        () => this.now,
      ),
    };
  }

  get options(): SimGatewayOptions {
    return this.#o;
  }

  /** The gateway's own clock. */
  get now(): number {
    return this.#o.scheduler.now + this.skewMs;
  }

  get sessionCount(): number {
    return this.#sessions.size;
  }

  /** A new stream from an agent. */
  accept(stream: SimStream): void {
    const s = new SimSession(this, stream, this.#o.newId(), this.#process.publisher);
    this.#sessions.add(s);
    stream.attach(s);
    s.start();
  }

  /** The process dies: its streams break, nothing more is appended or relayed. */
  crash(): void {
    this.up = false;
    this.serving = false;
    this.#process.connection.close();
    for (const s of [...this.#sessions]) s.dropped();
    this.#sessions.clear();
    this.#byId.clear();
    this.#byNode.clear();
    this.#process = this.#newProcess();
  }

  /**
   * A new process: it follows the log at once, and takes streams once the
   * log stored its gateway-started event, as `llmgw gateway` serves only
   * after that append. A start whose append gives up fails, as the real
   * one exits, and is tried again later (its supervisor restarts it).
   */
  start(): void {
    this.up = true;
    const c = this.#o.config;
    const proc = this.#process;
    proc.publisher
      .append(
        gatewayStartedEvent(
          this.id,
          { listenAddress: this.#o.listenAddress, version: c.version, leaseTtlMs: c.leaseTtlMs },
          this.now,
        ),
      )
      .then(
        () => {
          if (this.#process === proc) this.serving = true;
        },
        () => {
          if (this.#process !== proc) return;
          this.crash();
          this.#o.scheduler.after(FAILED_START_RETRY_MS, () => {
            if (!this.up) this.start();
          });
        },
      );
  }

  /** The log stored `r` (followed by every gateway, late by the follow latency). */
  onRecord(r: StoredRecord): void {
    if (!this.up) return;
    const { watch, relay } = this.#process;
    switch (r.event.body.case) {
      case "sessionOpened":
      case "sessionClosed":
        watch.onRecord(r);
        return;
      case "gatewayStarted":
      case "gatewayStopped":
        watch.onGatewayRecord(r);
        return;
      case "reconcilePass":
        watch.onPass(r);
        relay.onRecord(r);
        return;
      default:
        return;
    }
  }

  /** Closes `s` if a newer session of its node is in the log. */
  checkSuperseded(s: SimSession): void {
    this.#process.watch.check(s);
  }

  /** The gateway's admission of a registered stream: the duplicate-identity check. */
  admit(s: SimSession): Close | undefined {
    let mine = this.#byNode.get(s.state.nodeId);
    if (!mine) {
      mine = new Set();
      this.#byNode.set(s.state.nodeId, mine);
    }
    mine.add(s);
    const local = [...mine].filter((o) => o !== s && o.state.phase === "open").map((o) => o.asLocal());
    const holder = liveHolder(
      s.state.instanceId,
      local,
      this.#process.watch.newest(s.state.nodeId),
      this.id,
      this.core.heartbeatTimeoutMs,
    );
    if (!holder) return undefined;
    return {
      kind: "refused",
      code: Code.AlreadyExists,
      detail: `node ${s.state.nodeId} has a live session (${holder.sessionId} on gateway ${holder.gatewayId}) held by another agent process`,
      retryAfterMs: this.#o.config.duplicateRetryAfterMs,
    };
  }

  /** A session of this gateway opened: the gateway holds it (commands to it are relayed). */
  opened(s: SimSession): void {
    this.#byId.set(s.state.sessionId, s);
  }

  /** A session of this gateway ended; one it held is remembered by the relay. */
  ended(s: SimSession): void {
    this.#sessions.delete(s);
    if (this.#byId.get(s.state.sessionId) === s) {
      this.#byId.delete(s.state.sessionId);
      this.#process.relay.sessionEnded(s);
    }
    const mine = this.#byNode.get(s.state.nodeId);
    mine?.delete(s);
    if (mine?.size === 0) this.#byNode.delete(s.state.nodeId);
  }
}

interface GatewayProcess {
  connection: SimConnection;
  publisher: Publisher;
  watch: SessionsWatch<SimSession>;
  relay: CommandRelay<SimSession>;
}

/** How long a supervisor waits before it starts a gateway whose start failed again. */
const FAILED_START_RETRY_MS = 5_000;

/** The relay logs nothing here: what it does is in the log. */
const SILENT: RelayLogger = { debug() {}, info() {}, warn() {} };

/** One gateway metrics registry for every simulated gateway of a process: what runs reads none of it. */
let sharedMetrics: GatewayMetrics | undefined;

function simGatewayMetrics(): GatewayMetrics {
  sharedMetrics ??= new GatewayMetrics();
  return sharedMetrics;
}

/** One agent stream at a gateway: the session core, fed as the gateway's shell feeds it. */
export class SimSession implements StreamReceiver {
  state: SessionState;
  readonly #gw: SimGateway;
  readonly #publisher: Publisher;
  /** The session's events on their way into the log: the gateway's own pipeline. */
  readonly #pipeline: OrderedPipeline<string | undefined>;
  /** The shell's stopReading: aborted at the close (failed appends are no longer retried) or the process's death. */
  readonly #stop = new AbortController();
  /** What the stream delivered and the session has not read yet (undefined: the stream ended). */
  readonly #inbox: Array<AgentMessage | undefined> = [];
  /** Reading waits for room in the pipeline, or for it to settle before the stream's end is read. */
  #waiting = false;
  #readDeadline: TimerHandle | undefined;
  #ackLater: TimerHandle | undefined;
  #usage: TimerHandle | undefined;
  #lastMessageAt = 0;
  #longestGap: number | undefined;
  #finished = false;

  constructor(
    gw: SimGateway,
    readonly stream: SimStream,
    sessionId: string,
    publisher: Publisher,
  ) {
    this.#gw = gw;
    this.#publisher = publisher;
    this.state = initialState(gw.core, { kind: "plaintext" }, sessionId, `sim://${stream.nodeId}`);
    this.#pipeline = new OrderedPipeline(
      publisher,
      gw.options.config.streamWindow,
      this.#stop.signal,
      (err) =>
        this.feed({
          kind: "log-failed",
          unavailable: isLogError(err, "unavailable"),
          detail: (err as Error).message,
        }),
      (ackId, a) => this.#stored(ackId, a),
    );
  }

  // --- what the gateway's SessionsWatch reads of a held session ---

  get nodeId(): string {
    return this.state.nodeId;
  }

  get sessionId(): string {
    return this.state.sessionId;
  }

  get openedSeq(): number {
    return this.state.openedSeq;
  }

  supersede(byGateway: string): void {
    this.feed({ kind: "superseded", byGateway });
  }

  // --- what the gateway's CommandRelay reads of a held session ---

  get closing(): boolean {
    return this.state.close !== undefined;
  }

  get closeDetail(): string {
    return this.state.close?.detail ?? "";
  }

  deliver(msg: ControlMessage): PushResult {
    if (this.#finished || this.state.close !== undefined) return "closed";
    this.stream.send(msg);
    return "queued";
  }

  close(close: Close): void {
    this.feed({ kind: "close", close });
  }

  start(): void {
    this.#lastMessageAt = this.#gw.now;
    this.#armReadDeadline();
  }

  asLocal() {
    const now = this.#gw.now;
    return {
      sessionId: this.state.sessionId,
      instanceId: this.state.instanceId,
      remoteAddress: this.state.remoteAddress,
      closing: this.state.close !== undefined,
      silentForMs: now - this.#lastMessageAt,
      longestGapMs: this.#longestGap,
    };
  }

  // --- StreamReceiver ---------------------------------------------------------

  message(m: AgentMessage): void {
    if (this.state.close !== undefined) return;
    this.#inbox.push(m);
    this.#read();
  }

  ended(): void {
    this.#inbox.push(undefined);
    this.#read();
  }

  disconnected(): void {
    this.feed({ kind: "disconnected" });
  }

  /** The gateway's process died: nothing more happens here, nothing is appended. */
  dropped(): void {
    this.#finished = true;
    this.#stop.abort();
    this.#clearTimers();
    this.stream.reset("the gateway went away");
  }

  // --- the shell -------------------------------------------------------------------

  /**
   * Reads what the stream delivered, as the shell's read loop does: not
   * while the pipeline has no room (`depth` events queued, or a retry under
   * way: the agent's messages wait in the transport, and no read deadline
   * runs meanwhile), and the stream's end only once what was published is
   * stored (done sending, not done listening).
   */
  #read(): void {
    while (!this.#waiting && this.#inbox.length > 0) {
      if (this.#finished || this.state.close !== undefined) {
        this.#inbox.length = 0;
        return;
      }
      const room = this.#pipeline.whenRoom();
      if (room) {
        this.#wait(room);
        return;
      }
      const m = this.#inbox.shift();
      if (m === undefined) {
        this.#wait(this.#pipeline.settled(), () => this.feed({ kind: "stream-ended" }));
        return;
      }
      this.#take(m);
    }
  }

  #wait(p: Promise<void>, then?: () => void): void {
    this.#waiting = true;
    this.#gw.options.scheduler.cancel(this.#readDeadline);
    void p.then(() => {
      this.#waiting = false;
      then?.();
      if (this.#finished || this.state.close !== undefined) return;
      this.#armReadDeadline();
      this.#read();
    });
  }

  #take(m: AgentMessage): void {
    const now = this.#gw.now;
    if (this.state.seq > 0) this.#longestGap = Math.max(this.#longestGap ?? 0, now - this.#lastMessageAt);
    this.#lastMessageAt = now;
    const wasRegistering = this.state.phase === "registering";
    this.feed({ kind: "message", message: m, draining: false, at: now });
    if (this.state.close === undefined) this.#armReadDeadline();
    if (wasRegistering && awaitsAdmission(this.state)) {
      const refused = this.#gw.admit(this);
      this.feed(refused ? { kind: "close", close: refused } : { kind: "admitted" });
      // As the shell's #open: the session's opening is stored before its next message is read.
      if (!refused) this.#wait(this.#pipeline.settled());
    }
  }

  /** The pipeline handed over an event's ack, in order. */
  #stored(ackId: string | undefined, a: Appended): void {
    if (ackId === undefined || this.#finished) return;
    this.feed({ kind: "stored", messageId: ackId, seq: a.seq });
    if (ackId === "register" && this.state.openedSeq > 0) {
      this.#gw.opened(this);
      this.#gw.checkSuperseded(this);
    }
  }

  feed(input: Input): void {
    if (this.#finished) return;
    const r = step(this.state, input);
    this.state = r.state;
    for (const reply of r.replies) this.stream.send(reply.message);
    for (const t of r.timers) this.#startTimer(t);
    for (const e of r.events) {
      try {
        this.#pipeline.push(gatewayEvent(this.#gw.id, e.id, e.body, this.#gw.now), e.ackId);
      } catch {
        // A failed pipeline closed the session already (its onFail): nothing to do here.
      }
    }
    if (r.close) this.#closed(r.close);
  }

  #startTimer(t: "read-deadline" | "ack-flush" | "ack-later" | "usage-flush"): void {
    const s = this.#gw.options.scheduler;
    switch (t) {
      case "ack-flush":
        s.after(0, () => {
          s.cancel(this.#ackLater);
          this.feed({ kind: "timer", timer: "ack-flush" });
        });
        return;
      case "ack-later":
        s.cancel(this.#ackLater);
        this.#ackLater = s.after(this.state.config.ackDelayMs, () =>
          this.feed({ kind: "timer", timer: "ack-later" }),
        );
        return;
      case "usage-flush":
        s.cancel(this.#usage);
        this.#usage = s.after(usageFlushDelayMs(this.state, this.#gw.now), () =>
          this.feed({ kind: "timer", timer: "usage-flush" }),
        );
        return;
      case "read-deadline":
        return; // armed at every read
      default: {
        const never: never = t;
        throw new Error(`unknown timer ${String(never)}`);
      }
    }
  }

  #armReadDeadline(): void {
    const s = this.#gw.options.scheduler;
    s.cancel(this.#readDeadline);
    this.#readDeadline = s.after(readDeadlineMs(this.state), () =>
      this.feed({ kind: "timer", timer: "read-deadline" }),
    );
  }

  #clearTimers(): void {
    const s = this.#gw.options.scheduler;
    s.cancel(this.#readDeadline);
    s.cancel(this.#ackLater);
    s.cancel(this.#usage);
  }

  /** The core closed the session: stop reading, end the stream, and once what it published settled, append its close. */
  #closed(close: Close): void {
    this.#stop.abort();
    this.#clearTimers();
    const { code } = closeOutcome(close);
    this.stream.end(code, close.detail);
    if (close.kind === "refused") {
      this.#finished = true;
      this.#gw.ended(this);
      return;
    }
    void this.#pipeline.settled().then(() => this.#appendClosed());
  }

  /** The session-closed event, after everything the session published, through the publisher's retries as the gateway's. */
  #appendClosed(): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#gw.ended(this);
    const { draft, appendLimitMs } = closedEvent(this.state);
    this.#publisher
      .append(gatewayEvent(this.#gw.id, draft.id, draft.body, this.#gw.now), { limitMs: appendLimitMs })
      .catch(() => {
        // The lease, and the reconciler's expiry of this gateway's sessions, cover a close the log never heard of.
      });
  }
}
