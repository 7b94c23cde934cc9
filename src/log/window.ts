import type { Event } from "../gen/llmgw/v1/events_pb.js";
import type { Appended, AppendHandler, AppendOptions, LogAppender } from "./append.js";
import type { LogError } from "./errors.js";

/**
 * Pipelined appends with a bounded number in flight. `append` waits for a
 * free slot before publishing, so a caller that awaits it (for example
 * before reading the next agent message) is slowed down to what the log
 * takes, instead of buffering without bound. Appends made from one
 * connection reach the stream in the order they were started.
 */
export class AppendWindow {
  #inFlight = 0;
  /** Waiting for a slot, first come first served; each says whether it takes the slot it is offered. */
  readonly #waiters: Array<() => boolean> = [];

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
   * the ack (or rejects with a LogError). A caller that waits is started
   * from the call that freed its slot, in turn with the other waiters: the
   * callers that start appends from an ack's handler cannot take every
   * slot before it.
   */
  start(event: Event, opts?: AppendOptions): Promise<{ acked: Promise<Appended> }> {
    let handler: AppendHandler | undefined;
    const acked = new Promise<Appended>((resolve, reject) => {
      handler = { appended: resolve, failed: reject };
    });
    return new Promise((resolve) => {
      const started = (): boolean => {
        if (!this.tryStartWith(event, opts, handler!)) return false;
        resolve({ acked });
        return true;
      };
      if (!started()) this.#waiters.push(started);
    });
  }

  /**
   * Starts an append at once if a slot is free, telling `handler` how it
   * ended (after the slot is given back); returns false (and starts
   * nothing) when the window is full. The gateway's path for every agent
   * message: no promise.
   */
  tryStartWith(event: Event, opts: AppendOptions | undefined, handler: AppendHandler): boolean {
    if (this.#inFlight >= this.max) return false;
    this.#inFlight++;
    this.appender.appendWith(event, opts ?? {}, new Slot(this.#release, handler));
    return true;
  }

  /**
   * Calls `taken` once a slot is free, from the call that gave it back, in
   * turn with every other waiter (`start`'s too): a caller that starts its
   * append there has the slot before anybody else can take it. `taken`
   * returns whether it took the slot; when it did not, the next waiter is
   * asked. Call it when `tryStartWith` found the window full: a waiter added
   * while a slot is free is asked only at the next release.
   */
  whenFree(taken: () => boolean): void {
    this.#waiters.push(taken);
  }

  readonly #release = (): void => {
    this.#inFlight--;
    while (this.#inFlight < this.max) {
      const waiter = this.#waiters.shift();
      if (waiter === undefined || waiter()) return;
    }
  };

  /** Appends and waits for the ack, holding a slot meanwhile. */
  async append(event: Event, opts?: AppendOptions): Promise<Appended> {
    const { acked } = await this.start(event, opts);
    return acked;
  }
}

/** One slot taken: given back before the append's own handler hears how it ended. */
class Slot implements AppendHandler {
  constructor(
    private readonly release: () => void,
    private readonly handler: AppendHandler,
  ) {}

  appended(a: Appended): void {
    this.release();
    this.handler.appended(a);
  }

  failed(err: LogError): void {
    this.release();
    this.handler.failed(err);
  }
}
