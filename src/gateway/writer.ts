/**
 * The one writer of an agent stream. Everything sent to an agent (acks,
 * relayed commands, Reconnect) goes through its bounded queue; the stream's
 * handler drains it in order, one message at a time, so writes are never
 * concurrent. A full queue means the agent is not reading: that is reported
 * to the caller, never absorbed by growing memory.
 */
export type PushResult = "queued" | "full" | "closed";

export class StreamWriter<T> implements AsyncIterable<T> {
  readonly #queue: T[] = [];
  #wake: (() => void) | undefined;
  #ended = false;
  #error: unknown;
  #failed = false;

  constructor(readonly max: number) {
    if (!Number.isInteger(max) || max < 1)
      throw new RangeError(`queue size must be a positive integer, got ${max}`);
  }

  get length(): number {
    return this.#queue.length;
  }

  get closed(): boolean {
    return this.#ended || this.#failed;
  }

  push(msg: T): PushResult {
    if (this.closed) return "closed";
    if (this.#queue.length >= this.max) return "full";
    this.#queue.push(msg);
    this.#signal();
    return "queued";
  }

  /**
   * Queues `msg`, or puts it in the place of the last queued message when
   * `supersedes(last)` says the new one makes it redundant (a cumulative ack
   * after another not yet written). Only a message still waiting is
   * replaced: one already handed to the transport is written as it was.
   */
  pushReplacingLast(msg: T, supersedes: (last: T) => boolean): PushResult | "replaced" {
    if (this.closed) return "closed";
    const last = this.#queue.length - 1;
    if (last >= 0 && supersedes(this.#queue[last]!)) {
      this.#queue[last] = msg;
      return "replaced";
    }
    return this.push(msg);
  }

  /** Ends the stream once what is queued has been written. */
  end(): void {
    this.#ended = true;
    this.#signal();
  }

  /** Ends the stream now with `err`; what is queued is dropped. */
  fail(err: unknown): void {
    if (this.#failed) return;
    this.#failed = true;
    this.#error = err;
    this.#queue.length = 0;
    this.#signal();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    for (;;) {
      if (this.#failed) throw this.#error;
      const next = this.#queue.shift();
      if (next !== undefined) {
        yield next;
        continue;
      }
      if (this.#ended) return;
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
    }
  }

  #signal(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}
