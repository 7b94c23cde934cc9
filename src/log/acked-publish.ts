import { JetStreamApiError, type PubAck } from "@nats-io/jetstream";
import {
  createInbox,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  PermissionViolationError,
} from "@nats-io/transport-node";
import { LogError, logErrorFrom, permissionDenied } from "./errors.js";
import { parsePubAck } from "./pub-ack.js";
import { PublishHeaders } from "./publish-headers.js";

export interface PublishExpect {
  /** The stream that must store the message (a subject captured by another stream is refused). */
  stream: string;
  /** The last sequence on the subject must be this (0: the subject is empty). */
  lastSubjectSeq?: number | undefined;
}

/**
 * Told how one publish ended: exactly one of its methods is called, once,
 * and never before the `send` that started it has returned.
 */
export interface AckHandler {
  acked(ack: PubAck): void;
  failed(err: LogError): void;
}

/** A publish waiting to be written, then for its ack: one object per message. */
interface Pending {
  readonly token: number;
  readonly subject: string;
  /** What is written; let go once it is (an encoded event may hold a shared slab). */
  data: Uint8Array | undefined;
  headers: MsgHdrs | undefined;
  readonly handler: AckHandler;
  readonly deadline: number;
  readonly timeoutMs: number;
}

/** How often in-flight publishes are checked against their deadlines. */
const SWEEP_MS = 50;

/**
 * JetStream publishes whose acks come back on one reply subscription.
 *
 * The client's `js.publish` is a request: per message it starts a timer,
 * allocates a deferred and, once the ack is in, an error object with a stack
 * trace to cancel the request with. At gateway rates that was a tenth of the
 * gateway's CPU (docs/PERFORMANCE.md). Here every publish carries a reply
 * subject under one inbox, a single subscription hands each ack to its
 * waiting caller, and one sweep timer enforces all the deadlines. What is
 * published within one turn of the event loop goes to the socket together.
 *
 * The wire protocol is the one `js.publish` speaks (the headers
 * `Nats-Msg-Id`, `Nats-Expected-Stream`, `Nats-Expected-Last-Subject-Sequence`,
 * written by PublishHeaders, and the JSON ack), so the server cannot tell
 * the difference.
 */
export class AckedPublisher {
  readonly #prefix: string;
  readonly #pending = new Map<number, Pending>();
  #next = 0;
  #outbox: Pending[] = [];
  #sweep: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(private readonly nc: NatsConnection) {
    this.#prefix = `${createInbox()}.`;
    nc.subscribe(`${this.#prefix}*`, {
      callback: (err, msg) => {
        if (err) this.#failAll(logErrorFrom(err, "the publish-ack subscription ended"));
        else this.#onAck(msg);
      },
    });
    void this.#watchPermissions();
    void nc.closed().then(() => {
      this.#closed = true;
      this.#failAll(new LogError("unavailable", "the NATS connection is closed"));
    });
  }

  get inFlight(): number {
    return this.#pending.size;
  }

  /**
   * Publishes `data` to `subject` with message id `msgId` (the server drops
   * a second copy within its duplicate window) and resolves with the
   * stream's ack. Rejects with a LogError: `unavailable` when no ack came
   * within `timeoutMs` or nothing answered, `wrong-last-sequence` when the
   * expectation failed, otherwise what the server said.
   */
  publish(
    subject: string,
    data: Uint8Array,
    msgId: string,
    expect: PublishExpect,
    timeoutMs: number,
  ): Promise<PubAck> {
    return new Promise((resolve, reject) =>
      this.send(subject, data, msgId, expect, timeoutMs, { acked: resolve, failed: reject }),
    );
  }

  /**
   * `publish` telling `handler` instead of settling a promise: a gateway
   * publishes every agent message, and a promise per layer of its publish
   * path (each with its reaction jobs) is a visible share of its CPU per
   * event under the ingest bench's load (docs/PERFORMANCE.md).
   */
  send(
    subject: string,
    data: Uint8Array,
    msgId: string,
    expect: PublishExpect,
    timeoutMs: number,
    handler: AckHandler,
  ): void {
    if (this.#closed || this.nc.isClosed()) {
      failSoon(handler, new LogError("unavailable", "the NATS connection is closed"));
      return;
    }
    let headers: PublishHeaders;
    try {
      headers = new PublishHeaders(msgId, expect.stream, expect.lastSubjectSeq);
    } catch (err) {
      failSoon(handler, logErrorFrom(err));
      return;
    }
    const token = ++this.#next;
    const p: Pending = {
      token,
      subject,
      data,
      headers,
      handler,
      deadline: performance.now() + timeoutMs,
      timeoutMs,
    };
    this.#pending.set(token, p);
    this.#outbox.push(p);
    if (this.#outbox.length === 1) setImmediate(this.#send);
    if (this.#sweep === undefined) {
      this.#sweep = setInterval(() => this.#expire(), SWEEP_MS);
      this.#sweep.unref();
    }
  }

  /**
   * Hands what was published since the last time to the client at once. The
   * client writes its buffer to the socket at the end of the current
   * microtask run; a gateway turns each agent message into a publish in
   * microtasks of its own, so published one by one they went out one socket
   * write each. Collected until the event loop's next turn, they go out in
   * one write (the order is kept).
   */
  readonly #send = (): void => {
    const out = this.#outbox;
    this.#outbox = [];
    for (const m of out) {
      const data = m.data;
      m.data = undefined;
      const headers = m.headers;
      m.headers = undefined;
      // Told already (the connection closed, or its subject was refused): not sent.
      if (data === undefined || headers === undefined || !this.#pending.has(m.token)) continue;
      try {
        this.nc.publish(m.subject, data, { reply: this.#prefix + m.token, headers });
      } catch (err) {
        if (this.#pending.delete(m.token)) tell(m.handler, logErrorFrom(err));
      }
    }
  };

  #onAck(msg: Msg): void {
    const token = Number(msg.subject.slice(this.#prefix.length));
    const p = this.#pending.get(token);
    if (p === undefined) return; // timed out already; a retry with the same id learns the outcome
    this.#pending.delete(token);
    // A status with no body is the server speaking, not the stream: 503 is
    // "no responders" (no stream took the subject, or JetStream is not up yet).
    const status = msg.headers?.code ?? 0;
    if (msg.data.length === 0 && status !== 0) {
      tell(
        p.handler,
        new LogError(
          "unavailable",
          status === 503
            ? "the log is unavailable: no stream answered the publish (JetStream not ready, or no stream on the subject)"
            : `the log is unavailable: the server answered ${status} ${msg.headers?.description ?? ""}`.trim(),
        ),
      );
      return;
    }
    const common = parsePubAck(msg.data);
    if (common) {
      tell(p.handler, undefined, common);
      return;
    }
    let body: {
      error?: ConstructorParameters<typeof JetStreamApiError>[0];
      stream?: string;
    } & Partial<PubAck>;
    try {
      body = msg.json();
    } catch (err) {
      tell(p.handler, new LogError("internal", "the server's publish ack is not JSON", { cause: err }));
      return;
    }
    if (body.error) {
      tell(p.handler, logErrorFrom(new JetStreamApiError(body.error)));
      return;
    }
    if (!body.stream || typeof body.seq !== "number") {
      tell(p.handler, new LogError("internal", `invalid publish ack: ${msg.string().slice(0, 200)}`));
      return;
    }
    tell(p.handler, undefined, { ...body, duplicate: body.duplicate === true } as PubAck);
  }

  /**
   * A publish the server's permissions refuse is dropped and answered with
   * an error on the connection, not with an ack: without this it would wait
   * out its deadline and be retried as if the log were down. Every publish
   * in flight to the refused subject fails at once, with permission-denied.
   */
  async #watchPermissions(): Promise<void> {
    for await (const s of this.nc.status()) {
      if (s.type !== "error" || !(s.error instanceof PermissionViolationError)) continue;
      if (s.error.operation !== "publish") continue;
      const denied = permissionDenied(s.error);
      for (const [token, p] of this.#pending) {
        if (p.subject !== s.error.subject) continue;
        this.#pending.delete(token);
        tell(p.handler, denied);
      }
    }
  }

  #expire(): void {
    const now = performance.now();
    for (const [token, p] of this.#pending) {
      if (p.deadline > now) continue;
      this.#pending.delete(token);
      tell(
        p.handler,
        new LogError("unavailable", `the log is unavailable: no publish ack within ${p.timeoutMs} ms`),
      );
    }
    if (this.#pending.size === 0) {
      clearInterval(this.#sweep);
      this.#sweep = undefined;
    }
  }

  #failAll(err: LogError): void {
    const failed = [...this.#pending.values()];
    this.#pending.clear();
    // Before the handlers: one may publish again at once (a freed window
    // slot is handed on from its handler), and that publish needs the sweep.
    clearInterval(this.#sweep);
    this.#sweep = undefined;
    for (const p of failed) tell(p.handler, err);
  }
}

/**
 * Calls the handler. A handler that throws is a bug of its caller: it is
 * rethrown on its own (an uncaught exception, as loud as it should be)
 * rather than into the NATS client's subscription, which would end it.
 */
function tell(handler: AckHandler, err: LogError | undefined, ack?: PubAck): void {
  try {
    if (err !== undefined) handler.failed(err);
    else handler.acked(ack!);
  } catch (thrown) {
    queueMicrotask(() => {
      throw thrown;
    });
  }
}

/** Fails a publish that never started, after its `send` has returned (the handler's promise). */
function failSoon(handler: AckHandler, err: LogError): void {
  queueMicrotask(() => tell(handler, err));
}
