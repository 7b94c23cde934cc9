import type { Event } from "../gen/llmgw/v1/events_pb.js";
import { type Appended, isLogError, LogError } from "../log/index.js";

/** Told how one attempt ended: exactly one method, once, never before the call that started it returned. */
export interface AttemptHandler {
  stored(a: Appended): void;
  failed(err: unknown): void;
}

/**
 * What the pipeline needs of the way into the log: the gateway's
 * `Publisher` (publisher.ts), over NATS in the gateway and over the
 * in-memory log in the simulation (src/simulation).
 */
export interface PipelinePublisher {
  /** Counts lost connections (see Publisher.epoch). */
  readonly epoch: number;
  readonly connected: boolean;
  /** One attempt, started now if the shared window has a free slot; false (nothing started) when it is full. */
  tryAttempt(event: Event, handler: AttemptHandler): boolean;
  /** Calls `taken` once the shared window has a free slot, from the call that freed it; `taken` says whether it took it. */
  whenSlot(taken: () => boolean): void;
  /** Appends `event`, retrying with its message id while the log is unavailable, until `signal` aborts or the limit. */
  append(event: Event, opts: { signal?: AbortSignal }): Promise<Appended>;
}

/** One event of the session: queued, then started, then told how its attempt ended. */
class Entry<T> implements AttemptHandler {
  ok: Appended | undefined;
  err: unknown;
  done = false;

  constructor(
    readonly event: Event,
    /** What the pipeline's `onStored` is told with the event's ack. */
    readonly token: T,
    private readonly onSettled: () => void,
  ) {}

  stored(a: Appended): void {
    this.ok = a;
    this.done = true;
    this.onSettled();
  }

  failed(err: unknown): void {
    this.err = err;
    this.done = true;
    this.onSettled();
  }
}

/**
 * One session's events on their way into the log, pipelined but kept in the
 * order the agent sent them.
 *
 * `push` queues an event; it is started (published) as soon as the
 * gateway's shared window has a slot, after every earlier event of the
 * session. Publishes from one NATS connection reach the stream in the order
 * they were sent, so acks normally come back in order; they are handed to
 * `onStored`, with the token each event was pushed with, strictly in order
 * all the same, so an agent never sees message n+1 acknowledged before n.
 *
 * The reader keeps at most `depth` events queued: it waits for `whenRoom`
 * before it reads the agent's next message, so a slow log stops the
 * session from reading its agent (HTTP/2 flow control pushes back).
 *
 * No promise per event: the attempts tell their entries how they ended,
 * and a slot of the shared window, once free, is handed to the pipeline
 * that waited for it from the call that freed it. Under load, waiting for
 * a slot through promises (a waiting push, its backlog, the reader's await)
 * was a chain of promises per message.
 *
 * When an attempt fails because the log is unavailable, nothing new is
 * started: the later attempts of the session settle, then the failed ones are
 * retried one by one, in order, with their message ids (a publish whose ack
 * was lost is stored once). After a lost connection (a new publisher epoch)
 * the events started before it settle before a newer one starts: publishes
 * started in different epochs may reach the stream out of order. The stream
 * sequences of a session's events must grow; if a retry was stored after a
 * later event of the same session (the later one got through while the
 * earlier did not, as in a stream-leader election), the session's order in
 * the log is broken and the pipeline fails with an `unavailable` error: the
 * session is closed and the agent registers again, its registration being
 * the full truth.
 */
export class OrderedPipeline<T> {
  /** Started entries first (in flight, or done behind a head still in flight), then the queued ones. */
  readonly #queue: Entry<T>[] = [];
  /** How many entries at the head of the queue are started. */
  #started = 0;
  readonly #waiters: Array<() => void> = [];
  #epoch = -1;
  #lastSeq = 0;
  #recovering = false;
  #failure: unknown;
  #failed = false;
  #draining = false;
  #waitingForSlot = false;

  constructor(
    private readonly publisher: PipelinePublisher,
    readonly depth: number,
    private readonly signal: AbortSignal,
    private readonly onFail: (err: unknown) => void,
    private readonly onStored: (token: T, a: Appended) => void,
  ) {
    if (!Number.isInteger(depth) || depth < 1)
      throw new RangeError(`pipeline depth must be a positive integer, got ${depth}`);
  }

  /** Events of the session not yet stored (queued or in flight). */
  get inFlight(): number {
    return this.#queue.length;
  }

  /**
   * Queues `event` after the session's earlier ones and starts it if it
   * may start now. Throws the pipeline's failure if it failed.
   */
  push(event: Event, token: T): void {
    if (this.#failed) throw this.#failure;
    this.#queue.push(new Entry(event, token, this.#settledOne));
    this.#start();
  }

  /**
   * Undefined when the reader may take the agent's next message now; when
   * `depth` events are queued or the pipeline is retrying, a promise that
   * resolves once it may (or the pipeline failed: the next push throws its
   * failure).
   */
  whenRoom(): Promise<void> | undefined {
    return this.#hasRoom() ? undefined : this.#room();
  }

  #hasRoom(): boolean {
    return this.#failed || (this.#queue.length < this.depth && !this.#recovering);
  }

  /** Waits until there is room: a change (an ack handed over, a later one settled) need not make any. */
  async #room(): Promise<void> {
    while (!this.#hasRoom()) await this.#changed();
  }

  /** Resolves when nothing of this session is queued or in flight any more (or the pipeline failed). */
  async settled(): Promise<void> {
    while ((this.#queue.length > 0 && !this.#failed) || this.#recovering) await this.#changed();
  }

  /**
   * Starts queued entries, in order, while they may start: not while the
   * pipeline retries, and after a lost connection not before what was
   * started before it settled. Without a slot in the shared window, it
   * waits for one. Returns whether it started anything.
   */
  #start(): boolean {
    let any = false;
    while (this.#started < this.#queue.length && !this.#failed && !this.#recovering) {
      const epoch = this.publisher.epoch;
      // The connection dropped under earlier publishes: they settle (and are
      // retried in order) before anything newer is sent; the drain starts again.
      if (this.#started > 0 && (epoch !== this.#epoch || !this.publisher.connected)) break;
      this.#epoch = epoch;
      const entry = this.#queue[this.#started]!;
      if (!this.publisher.tryAttempt(entry.event, entry)) {
        if (!this.#waitingForSlot) {
          this.#waitingForSlot = true;
          this.publisher.whenSlot(this.#slotFree);
        }
        break;
      }
      this.#started++;
      any = true;
    }
    return any;
  }

  /** A slot of the shared window is free, offered to this pipeline: whether it took it. */
  readonly #slotFree = (): boolean => {
    this.#waitingForSlot = false;
    return this.#start();
  };

  /** An attempt ended: hand over what is stored from the head on, in order. */
  readonly #settledOne = (): void => {
    if (this.#failed) return;
    if (this.#recovering) {
      // The recovery waits for every started attempt to end.
      this.#wake();
      return;
    }
    // A nested call (from onStored) finds the loop below running.
    if (this.#draining) return;
    this.#draining = true;
    try {
      for (;;) {
        const head = this.#queue[0];
        if (head === undefined || !head.done) break;
        if (head.ok !== undefined) {
          if (!this.#inOrder(head.event, head.ok)) return;
          this.#queue.shift();
          this.#started--;
          this.onStored(head.token, head.ok);
          continue;
        }
        if (!isLogError(head.err, "unavailable") || this.signal.aborted) {
          this.#fail(head.err);
          return;
        }
        this.#recovering = true;
        void this.#recover();
        return;
      }
    } catch (err) {
      this.#fail(err);
    } finally {
      this.#draining = false;
      this.#wake();
    }
    this.#start();
  };

  /** The head failed: let the rest of what was started settle, then retry what failed, in order. */
  async #recover(): Promise<void> {
    try {
      while (this.#queue.slice(0, this.#started).some((e) => !e.done)) await this.#changed();
      const entries = this.#queue.splice(0, this.#started);
      this.#started = 0;
      for (const e of entries) {
        let ok = e.ok;
        if (ok === undefined) {
          try {
            ok = await this.publisher.append(e.event, { signal: this.signal });
          } catch (err) {
            return this.#fail(err);
          }
        }
        if (!this.#inOrder(e.event, ok)) return;
        this.onStored(e.token, ok);
      }
    } catch (err) {
      this.#fail(err);
    } finally {
      this.#recovering = false;
      this.#wake();
    }
    this.#start();
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
    this.#started = 0;
    this.#wake();
    this.onFail(err);
  }

  #changed(): Promise<void> {
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  #wake(): void {
    if (this.#waiters.length === 0) return;
    for (const w of this.#waiters.splice(0)) w();
  }
}
