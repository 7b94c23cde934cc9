import type { Event } from "../gen/llmgw/v1/events_pb.js";
import type { Appended, AppendOptions, LogAppender } from "./append.js";

/**
 * Pipelined appends with a bounded number in flight. `append` waits for a
 * free slot before publishing, so a caller that awaits it (for example
 * before reading the next agent message) is slowed down to what the log
 * takes, instead of buffering without bound. Appends made from one
 * connection reach the stream in the order they were started.
 */
export class AppendWindow {
  #inFlight = 0;
  readonly #waiters: Array<() => void> = [];

  constructor(
    private readonly appender: LogAppender,
    readonly max: number,
  ) {
    if (!Number.isInteger(max) || max < 1)
      throw new RangeError(`window size must be a positive integer, got ${max}`);
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  /**
   * Starts an append once a slot is free. The returned promise resolves when
   * the slot has been taken and the publish sent; its `acked` resolves with
   * the ack (or rejects with a LogError).
   */
  async start(event: Event, opts?: AppendOptions): Promise<{ acked: Promise<Appended> }> {
    for (;;) {
      const acked = this.tryStart(event, opts);
      if (acked) return { acked };
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }

  /**
   * Starts an append at once if a slot is free and returns its ack; returns
   * undefined (and starts nothing) when the window is full. The common case
   * of `start` without its promise, for callers on the per-message path.
   */
  tryStart(event: Event, opts?: AppendOptions): Promise<Appended> | undefined {
    if (this.#inFlight >= this.max) return undefined;
    this.#inFlight++;
    return this.appender.append(event, opts).then(this.#released, this.#releasedFailed);
  }

  // The window's own handlers, not closures made per append: this runs for every agent message.
  readonly #release = (): void => {
    this.#inFlight--;
    this.#waiters.shift()?.();
  };

  readonly #released = (a: Appended): Appended => {
    this.#release();
    return a;
  };

  readonly #releasedFailed = (err: unknown): never => {
    this.#release();
    throw err;
  };

  /** Appends and waits for the ack, holding a slot meanwhile. */
  async append(event: Event, opts?: AppendOptions): Promise<Appended> {
    const { acked } = await this.start(event, opts);
    return acked;
  }
}
