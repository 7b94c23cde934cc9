/**
 * One agent's connection to the control plane: a Connect stream to one of
 * the gateways at a time, registered first, heartbeating, reconnecting on its
 * own until stopped. It knows the protocol, not the node: what to register
 * and what a heartbeat says are asked of the caller at the moment they are
 * sent, and commands are handed to the caller.
 *
 * Used by the simulator and by the real node agent alike.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { PushQueue } from "../../async/push-queue.js";
import {
  type ControlMessage,
  type HeartbeatSchema,
  type Register,
  RegisterSchema,
  type RegisterSchema as RegisterSchemaType,
} from "../../gen/llmgw/v1/agent_pb.js";
import { AckTracker } from "./acks.js";
import { reconnectDelayMs } from "./backoff.js";
import { type AgentClock, SYSTEM_CLOCK, type TimerHandle } from "./clock.js";
import { type AgentMessageInit, UnackedOutbox } from "./outbox.js";
import { type AgentConnect, connectAgent, type TlsIdentity } from "./transport.js";

export type RegisterInit = MessageInitShape<typeof RegisterSchemaType>;
export type HeartbeatInit = MessageInitShape<typeof HeartbeatSchema>;

export type ConnectionEvent =
  | { type: "connecting"; url: string /** Not the first stream of this connection. */; reconnect: boolean }
  | { type: "registered"; url: string; sessionId: string }
  /** The gateway acknowledged message `messageId` of session `sessionId` ("1": the registration): it is in the log. */
  | { type: "acked"; sessionId: string; messageId: string }
  | {
      type: "disconnected";
      url: string;
      reason: string;
      /** The gateway asked for it (Reconnect), with the wait it asked for. */
      retryAfterMs?: number;
      /** How long until the next attempt (0 after a restart). */
      nextAttemptMs: number;
    }
  | { type: "resent"; count: number };

export interface ConnectionOptions {
  /** Gateways, tried in order from `firstGateway`; on any failure or Reconnect, the next. */
  gateways: readonly string[];
  firstGateway?: number;
  protocol: "connect" | "grpc";
  /** Asked at every connection attempt, so replaced certificate files take effect without a restart. */
  tls: () => TlsIdentity | undefined;
  ackTimeoutMs: number;
  heartbeatMs: number;
  reconnectMinMs: number;
  reconnectMaxMs: number;
  /** A number in [0, 1), for the reconnect jitter. */
  random: () => number;
  /** What to register, asked at every connection attempt (the node's state now). */
  registration: () => RegisterInit;
  /** The heartbeat to send, asked every heartbeatMs while registered; undefined: none this time. */
  heartbeat: () => HeartbeatInit | undefined;
  /** Start, stop and drain commands, once registered. */
  onControl: (m: ControlMessage) => void;
  onEvent?: (e: ConnectionEvent) => void;
  /**
   * Keep what was said and not acknowledged, and say it again on the next
   * stream, in order (the real agent). Off: a message the stream did not
   * carry is lost, and the next registration's running shards resynchronise
   * the control plane (how the simulator's agents behave).
   */
  resendUnacked: boolean;
  /** Time, timers and ids (default: the process's; `llmgw simulate` hands in simulated ones). */
  clock?: AgentClock;
  /** Opens a stream's connection (default: HTTP/2 to the gateway; `llmgw simulate` hands in its own transport). */
  connect?: AgentConnect;
}

type Outcome =
  | { kind: "reconnect"; retryAfterMs: number; registered: boolean }
  | { kind: "ended"; reason: string; registered: boolean };

interface Stream {
  url: string;
  outbox: PushQueue<AgentMessageInit>;
  registered: boolean;
  sessionId: string;
  abort: AbortController;
  acks: AckTracker;
}

export class AgentConnection {
  readonly #o: ConnectionOptions;
  readonly #clock: AgentClock;
  readonly #unacked = new UnackedOutbox();
  #stream: Stream | undefined;
  #stopped = true;
  #restartPending = false;
  #silent = false;
  #silenceHealMs = 0;
  #heartbeatTimer: TimerHandle | undefined;
  #wake: AbortController | undefined;
  #running: Promise<void> | undefined;
  #lastReason = "";
  #lastRegistration: Register | undefined;
  /**
   * Register.instance_id: the same on every stream of this connection, so a
   * gateway tells this agent reconnecting from a second agent presenting
   * the same certificate. A restart draws a new one, as a new process would.
   */
  #instanceId: string;

  constructor(opts: ConnectionOptions) {
    if (opts.gateways.length === 0) throw new Error("at least one gateway URL is needed");
    this.#o = opts;
    this.#clock = opts.clock ?? SYSTEM_CLOCK;
    this.#instanceId = this.#clock.newId();
  }

  /** Starts connecting; returns at once. */
  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#heartbeatTimer = this.#clock.setInterval(() => this.#heartbeat(), this.#o.heartbeatMs);
    this.#running = this.#run();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#clock.clearInterval(this.#heartbeatTimer);
    this.#stream?.abort.abort();
    this.#wake?.abort();
    await this.#running;
  }

  /** Drops the stream and connects again at once to the first gateway, as a restarted process would. */
  restart(): void {
    this.#restartPending = true;
    this.#instanceId = this.#clock.newId();
    this.#stream?.abort.abort();
    this.#wake?.abort();
  }

  /**
   * Hears nothing and says nothing from now on, with the stream left open
   * (a network partition); the next stream waits at least `healMs`.
   */
  silence(healMs: number): void {
    this.#silent = true;
    this.#silenceHealMs = healMs;
  }

  get silent(): boolean {
    return this.#silent;
  }

  /** Registered, and heard. */
  get connected(): boolean {
    return this.#stream?.registered === true && !this.#silent;
  }

  get url(): string | undefined {
    return this.#stream?.url;
  }

  get sessionId(): string | undefined {
    return this.#stream?.registered ? this.#stream.sessionId : undefined;
  }

  /** Why the last stream ended. */
  get lastDisconnectReason(): string {
    return this.#lastReason;
  }

  /** Register.instance_id of this agent process (see the field). */
  get instanceId(): string {
    return this.#instanceId;
  }

  /** The registration last sent. */
  get lastRegistration(): Register | undefined {
    return this.#lastRegistration;
  }

  /**
   * Registers again on the live stream (the node's hardware changed): the
   * gateway records the new registration. Not connected: the next
   * connection registers what the node has then anyway.
   */
  reregister(): boolean {
    const s = this.#stream;
    if (!s?.registered || this.#silent) return false;
    const registration = create(RegisterSchema, {
      ...this.#o.registration(),
      cumulativeAcks: true,
      instanceId: this.#instanceId,
    });
    this.#lastRegistration = registration;
    return this.#put(s, { msg: { case: "register", value: registration } }, undefined);
  }

  /** Messages in the current stream's send queue, not yet taken by the transport (0 without a stream). */
  get queued(): number {
    return this.#stream?.outbox.length ?? 0;
  }

  /** Messages said and not acknowledged yet (with resendUnacked). */
  get unacknowledged(): number {
    return this.#unacked.size;
  }

  /**
   * Says `msg` on the current stream. Returns whether it went out now; with
   * resendUnacked a message that did not is still said on the next stream.
   */
  send(msg: AgentMessageInit): boolean {
    const order = this.#o.resendUnacked ? this.#unacked.keep(msg) : undefined;
    const s = this.#stream;
    if (!s?.registered || this.#silent) return false;
    return this.#put(s, msg, order);
  }

  #put(s: Stream, msg: AgentMessageInit, order: number | undefined): boolean {
    if (s.outbox.push(msg) !== "queued") return false;
    const position = s.acks.record(msg.msg?.case);
    if (order !== undefined) this.#unacked.sentAt(order, position);
    return true;
  }

  #heartbeat(): void {
    const s = this.#stream;
    if (!s?.registered || this.#silent) return;
    // The gateway is not reading (HTTP/2 flow control): a heartbeat queued behind
    // unsent ones says nothing new, so the queue does not grow with time.
    if (s.outbox.length > 0) return;
    const hb = this.#o.heartbeat();
    if (hb) this.#put(s, { msg: { case: "heartbeat", value: hb } }, undefined);
  }

  async #run(): Promise<void> {
    const urls = this.#o.gateways;
    const first = (this.#o.firstGateway ?? 0) % urls.length;
    let next = first;
    let failures = 0;
    let reconnect = false;
    while (!this.#stopped) {
      const url = urls[next % urls.length]!;
      this.#o.onEvent?.({ type: "connecting", url, reconnect });
      reconnect = true;
      const outcome = await this.#connectOnce(url);
      if (this.#stopped) break;
      this.#lastReason = outcome.kind === "reconnect" ? "gateway asked to reconnect" : outcome.reason;
      if (this.#restartPending) {
        // A fresh process: back to its first gateway, no backoff.
        this.#restartPending = false;
        this.#silent = false;
        this.#o.onEvent?.({ type: "disconnected", url, reason: this.#lastReason, nextAttemptMs: 0 });
        next = first;
        failures = 0;
        continue;
      }
      next++;
      failures = outcome.registered ? 0 : failures + 1;
      let delay = reconnectDelayMs(
        failures,
        this.#o.reconnectMinMs,
        this.#o.reconnectMaxMs,
        this.#o.random(),
      );
      if (outcome.kind === "reconnect") delay = Math.max(delay, outcome.retryAfterMs);
      if (this.#silent) delay = Math.max(delay, this.#silenceHealMs);
      this.#o.onEvent?.({
        type: "disconnected",
        url,
        reason: this.#lastReason,
        ...(outcome.kind === "reconnect" ? { retryAfterMs: outcome.retryAfterMs } : {}),
        nextAttemptMs: delay,
      });
      await this.#sleep(delay);
      this.#silent = false;
    }
  }

  #sleep(ms: number): Promise<void> {
    if (this.#stopped || this.#restartPending || ms <= 0) return Promise.resolve();
    const wake = new AbortController();
    this.#wake = wake;
    return new Promise((resolve) => {
      const t = this.#clock.setTimeout(resolve, ms);
      wake.signal.addEventListener("abort", () => {
        this.#clock.clearTimeout(t);
        resolve();
      });
    });
  }

  async #connectOnce(url: string): Promise<Outcome> {
    const s: Stream = {
      url,
      outbox: new PushQueue(),
      registered: false,
      sessionId: "",
      abort: new AbortController(),
      acks: new AckTracker(true),
    };
    this.#stream = s;
    let conn: ReturnType<typeof connectAgent>;
    try {
      conn = (this.#o.connect ?? connectAgent)(url, this.#o.protocol, this.#o.tls());
    } catch (err) {
      this.#stream = undefined;
      return { kind: "ended", reason: err instanceof Error ? err.message : String(err), registered: false };
    }
    let ackTimedOut = false;
    const ackTimer = this.#clock.setTimeout(() => {
      ackTimedOut = true;
      s.abort.abort();
    }, this.#o.ackTimeoutMs);
    const registration = create(RegisterSchema, {
      ...this.#o.registration(),
      cumulativeAcks: true,
      instanceId: this.#instanceId,
    });
    this.#lastRegistration = registration;
    s.outbox.push({ msg: { case: "register", value: registration } });
    s.acks.record("register");
    try {
      for await (const m of conn.client.connect(s.outbox, { signal: s.abort.signal })) {
        // A partitioned node hears nothing either.
        if (this.#silent) continue;
        if (m.msg.case === "reconnect") {
          return { kind: "reconnect", retryAfterMs: m.msg.value.retryAfterMs, registered: s.registered };
        }
        if (m.msg.case === "ack" && !s.registered && m.msg.value.messageId === "register") {
          if (!m.msg.value.ok) {
            return { kind: "ended", reason: `registration refused: ${m.msg.value.error}`, registered: false };
          }
          this.#clock.clearTimeout(ackTimer);
          s.registered = true;
          s.sessionId = m.msg.value.sessionId;
          this.#o.onEvent?.({ type: "registered", url, sessionId: s.sessionId });
          this.#acked(s, "1");
          this.#resend(s);
          continue;
        }
        if (m.msg.case === "ack" && s.registered && m.msg.value.ok) {
          // Cumulative (the registration asks for it): the ack of message n
          // stands for every earlier message the gateway acknowledges.
          const positions = s.acks.acked(m.msg.value.messageId);
          this.#unacked.acked(positions);
          for (const n of positions) this.#acked(s, String(n));
          continue;
        }
        if (s.registered) this.#o.onControl(m);
      }
      return { kind: "ended", reason: "gateway closed the stream", registered: s.registered };
    } catch (err) {
      const reason = ackTimedOut
        ? `no registration ack within ${this.#o.ackTimeoutMs} ms`
        : this.#restartPending
          ? "agent restarted"
          : err instanceof Error
            ? err.message
            : String(err);
      return { kind: "ended", reason, registered: s.registered };
    } finally {
      this.#clock.clearTimeout(ackTimer);
      s.outbox.end();
      s.abort.abort();
      conn.close();
      if (this.#stream === s) this.#stream = undefined;
    }
  }

  /** What was not acknowledged on earlier streams goes out again, first, in order. */
  #resend(s: Stream): void {
    if (!this.#o.resendUnacked) return;
    const pending = this.#unacked.pendingForNewStream();
    for (const p of pending) this.#put(s, p.msg, p.order);
    if (pending.length > 0) this.#o.onEvent?.({ type: "resent", count: pending.length });
  }

  #acked(s: Stream, messageId: string): void {
    if (s.sessionId === "") return;
    this.#o.onEvent?.({ type: "acked", sessionId: s.sessionId, messageId });
  }
}
