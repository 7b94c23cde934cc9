/**
 * The one push-fed async queue: values pushed by one side, taken in order by
 * whoever iterates it (a Connect stream's request or response side). The
 * simulator's agents, the test and benchmark agents and the tests' fake
 * gateway send through it, and the gateway's writer of an agent stream is
 * one with a bound (`StreamWriter`).
 *
 * The iterator is written by hand, not as an async generator: a transport
 * may call `return()` while a `next()` is still waiting, and an async
 * generator would queue that `return()` behind the `next()` for ever.
 */
export type PushResult = "queued" | "full" | "closed";

export class PushQueue<T> implements AsyncIterable<T> {
  readonly #items: T[] = [];
  #waiting: { resolve(r: IteratorResult<T>): void; reject(err: unknown): void } | undefined;
  #ended = false;
  #failed = false;
  #error: unknown;
  /** With `end(err)`: the error the iteration fails with once what is queued has been taken. */
  #endError: { err: unknown } | undefined;

  /** `max`: how many values may wait; a push beyond it is refused ("full"). */
  constructor(readonly max = Number.POSITIVE_INFINITY) {
    if (max !== Number.POSITIVE_INFINITY && (!Number.isInteger(max) || max < 1))
      throw new RangeError(`queue size must be a positive integer, got ${max}`);
  }

  /** Values pushed and not yet taken. */
  get length(): number {
    return this.#items.length;
  }

  /** Ended or failed: pushes are refused. */
  get closed(): boolean {
    return this.#ended || this.#failed;
  }

  push(item: T): PushResult {
    if (this.closed) return "closed";
    const w = this.#waiting;
    if (w) {
      this.#waiting = undefined;
      w.resolve({ value: item, done: false });
      return "queued";
    }
    if (this.#items.length >= this.max) return "full";
    this.#items.push(item);
    return "queued";
  }

  /**
   * Puts `item` in the place of the last value still waiting when
   * `supersedes(last)` says it makes that one redundant; true when it did.
   * A value already taken is never replaced.
   */
  replaceLast(item: T, supersedes: (last: T) => boolean): boolean {
    if (this.closed) return false;
    const last = this.#items.length - 1;
    if (last < 0 || !supersedes(this.#items[last] as T)) return false;
    this.#items[last] = item;
    return true;
  }

  /**
   * Ends the iteration once what is queued has been taken; with `err`, the
   * iteration then fails with it (what was queued is still delivered first).
   */
  end(...err: [] | [unknown]): void {
    if (this.closed) return;
    this.#ended = true;
    if (err.length > 0) this.#endError = { err: err[0] };
    const w = this.#waiting;
    this.#waiting = undefined;
    if (w && this.#endError) w.reject(this.#endError.err);
    else w?.resolve({ value: undefined, done: true });
  }

  /** Ends the iteration now with `err`; what is queued is dropped. */
  fail(err: unknown): void {
    if (this.#failed) return;
    this.#failed = true;
    this.#error = err;
    this.#items.length = 0;
    const w = this.#waiting;
    this.#waiting = undefined;
    w?.reject(err);
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        if (this.#failed) return Promise.reject(this.#error);
        if (this.#items.length > 0) return Promise.resolve({ value: this.#items.shift() as T, done: false });
        if (this.#ended)
          return this.#endError
            ? Promise.reject(this.#endError.err)
            : Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve, reject) => {
          this.#waiting = { resolve, reject };
        });
      },
      return: () => {
        this.end();
        return Promise.resolve({ value: undefined, done: true });
      },
      // The transport throws into the iterable when the call fails; nothing more will be taken.
      throw: (err?: unknown) => {
        this.end();
        return Promise.reject(err);
      },
    };
  }
}
