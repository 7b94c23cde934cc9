import type { Event } from "../gen/llmgw/v1/events_pb.js";
import { type Appended, isLogError, LogError } from "../log/index.js";
import type { Attempted, Publisher } from "./publisher.js";

interface Entry {
  readonly event: Event;
  readonly onStored: (a: Appended) => void;
  readonly settled: Promise<Attempted>;
}

/**
 * One session's events on their way into the log, pipelined but kept in the
 * order the agent sent them.
 *
 * Up to `depth` publishes of a session are in flight at once (a stream is no
 * longer bound to one publish round trip). Publishes from one NATS
 * connection reach the stream in the order they were sent, so acks normally
 * come back in order; they are handed to `onStored` strictly in order all
 * the same, so an agent never sees message n+1 acknowledged before n.
 *
 * When an attempt fails because the log is unavailable, nothing new is
 * started: the later attempts of the session settle, then the failed ones are
 * retried one by one, in order, with their message ids (a publish whose ack
 * was lost is stored once). The stream sequences of a session's events must
 * grow; if a retry was stored after a later event of the same session (the
 * later one got through while the earlier did not, as in a stream-leader
 * election), the session's order in the log is broken and the pipeline fails
 * with an `unavailable` error: the session is closed and the agent registers
 * again, its registration being the full truth.
 *
 * `push` waits while the pipeline is full or recovering, so a slow log stops
 * the session from reading its agent (HTTP/2 flow control pushes back).
 */
export class OrderedPipeline {
  readonly #queue: Entry[] = [];
  readonly #waiters: Array<() => void> = [];
  #epoch = -1;
  #lastSeq = 0;
  #recovering = false;
  #failure: unknown;
  #failed = false;
  #running = false;
  #loop: Promise<void> = Promise.resolve();

  constructor(
    private readonly publisher: Publisher,
    readonly depth: number,
    private readonly signal: AbortSignal,
    private readonly onFail: (err: unknown) => void,
  ) {
    if (!Number.isInteger(depth) || depth < 1)
      throw new RangeError(`pipeline depth must be a positive integer, got ${depth}`);
  }

  get inFlight(): number {
    return this.#queue.length;
  }

  /**
   * Starts publishing `event` after the session's earlier ones. Returns
   * undefined when it was sent at once, otherwise a promise that resolves
   * once it is sent; throws (or rejects) with the pipeline's failure if it
   * failed.
   */
  push(event: Event, onStored: (a: Appended) => void): Promise<void> | undefined {
    // The common case, without a promise: room in this pipeline and in the
    // shared window, nothing to wait for. This runs for every agent message.
    if (this.#ready()) {
      const settled = this.publisher.tryAttempt(event);
      if (settled) {
        this.#started(event, onStored, settled);
        return undefined;
      }
    }
    return this.#pushSlow(event, onStored);
  }

  async #pushSlow(event: Event, onStored: (a: Appended) => void): Promise<void> {
    for (;;) {
      if (this.#failed) throw this.#failure;
      if (this.#queue.length >= this.depth || this.#recovering) {
        await this.#changed();
        continue;
      }
      const epoch = this.publisher.epoch;
      if (this.#queue.length > 0 && (epoch !== this.#epoch || !this.publisher.connected)) {
        // The connection dropped under earlier publishes: they settle (and
        // are retried in order) before anything newer is sent.
        await this.settled();
        continue;
      }
      this.#epoch = epoch;
      break;
    }
    const { settled } = await this.publisher.attempt(event);
    this.#started(event, onStored, settled);
  }

  /** Whether a push may start at once: the checks of `#pushSlow`'s loop, none of them waiting. */
  #ready(): boolean {
    if (this.#failed || this.#recovering || this.#queue.length >= this.depth) return false;
    const epoch = this.publisher.epoch;
    if (this.#queue.length > 0 && (epoch !== this.#epoch || !this.publisher.connected)) return false;
    this.#epoch = epoch;
    return true;
  }

  #started(event: Event, onStored: (a: Appended) => void, settled: Promise<Attempted>): void {
    this.#queue.push({ event, onStored, settled });
    if (!this.#running) {
      this.#running = true;
      this.#loop = this.#complete().finally(() => this.#wake());
    }
  }

  /** Resolves when nothing of this session is in flight any more. */
  async settled(): Promise<void> {
    while (this.#running) await this.#loop;
  }

  async #complete(): Promise<void> {
    try {
      for (;;) {
        // `finally` runs synchronously with this last check, so a push right after starts a new loop.
        if (this.#queue.length === 0 || this.#failed) return;
        const head = this.#queue[0]!;
        const r = await head.settled;
        if (r.ok !== undefined) {
          if (!this.#inOrder(head.event, r.ok)) return;
          this.#queue.shift();
          head.onStored(r.ok);
          this.#wake();
          continue;
        }
        if (!isLogError(r.err, "unavailable") || this.signal.aborted) return this.#fail(r.err);
        await this.#recover();
      }
    } catch (err) {
      this.#fail(err);
    } finally {
      this.#running = false;
    }
  }

  /** The head failed: let the rest settle, then retry what failed, in order. */
  async #recover(): Promise<void> {
    this.#recovering = true;
    try {
      const entries = this.#queue.splice(0);
      const results = await Promise.all(entries.map((e) => e.settled));
      for (const [i, e] of entries.entries()) {
        let ok = results[i]?.ok;
        if (ok === undefined) {
          try {
            ok = await this.publisher.append(e.event, { signal: this.signal });
          } catch (err) {
            return this.#fail(err);
          }
        }
        if (!this.#inOrder(e.event, ok)) return;
        e.onStored(ok);
      }
    } finally {
      this.#recovering = false;
      this.#wake();
    }
  }

  #inOrder(event: Event, a: Appended): boolean {
    if (a.seq > this.#lastSeq) {
      this.#lastSeq = a.seq;
      return true;
    }
    this.#fail(
      new LogError(
        "unavailable",
        `event ${event.id} was stored at sequence ${a.seq}, after a later event of its session (${this.#lastSeq}) got through while it was retried; the session must register again`,
      ),
    );
    return false;
  }

  #fail(err: unknown): void {
    if (this.#failed) return;
    this.#failed = true;
    this.#failure = err;
    this.#queue.length = 0;
    this.#wake();
    this.onFail(err);
  }

  #changed(): Promise<void> {
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  #wake(): void {
    for (const w of this.#waiters.splice(0)) w();
  }
}
