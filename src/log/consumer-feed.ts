/**
 * What a consumer hands a read: its messages, taken a batch at a time
 * (Inbox; also the pull pass's, pull-pass.ts), and the watchdog that ends the read when the consumer goes
 * quiet (ReadWatchdog). Used by reader.ts.
 */
import type { JsMsg } from "@nats-io/jetstream";
import { LogError } from "./errors.js";

/**
 * Each pull of a read lasts this long before the next; heartbeats come at
 * IDLE_HEARTBEAT_MS, which the server wants at most half of it.
 */
export const READ_EXPIRES_MS = 5_000;

/**
 * Two missed in a row (4–6 s of silence) end a read as unavailable: long
 * enough that a busy process's event-loop lag is not taken for a dead member.
 */
export const IDLE_HEARTBEAT_MS = 2_000;

/**
 * Messages a pull asks for unless the read says (`ReadOptions.batch`); the
 * next pull goes out when half have arrived.
 */
export const READ_BATCH = 10_000;

/**
 * Messages handed over by the consumer's callback, taken a batch at a time.
 * `take` resolves with everything that arrived (waiting when nothing has),
 * or, once the consumer stopped and all was taken, with undefined, or
 * throws what it stopped with.
 */
export class Inbox<M = JsMsg> {
  #messages: M[] = [];
  #wake: (() => void) | undefined;
  #closed = false;
  #error: Error | undefined;

  put(m: M): void {
    this.#messages.push(m);
    this.#wakeUp();
  }

  close(err: Error | undefined): void {
    this.#closed = true;
    this.#error = err;
    this.#wakeUp();
  }

  async take(): Promise<M[] | undefined> {
    while (this.#messages.length === 0) {
      if (this.#closed) {
        if (this.#error) throw this.#error;
        return undefined;
      }
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
    }
    const taken = this.#messages;
    this.#messages = [];
    return taken;
  }

  #wakeUp(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}

/**
 * Ends a read with an `unavailable` LogError when its consumer went quiet:
 * two missed heartbeats, or no message and no new pull for two pull periods
 * (the library's own recovery can loop silently on requests to a dead host).
 */
export class ReadWatchdog {
  #last = Date.now();
  readonly #timer: NodeJS.Timeout;
  #done = false;
  #error: LogError | undefined;

  constructor(
    private readonly messages: { status(): AsyncIterable<{ type: string }>; stop(err?: Error): void },
    private readonly stream: string,
  ) {
    this.#timer = setInterval(() => {
      const quiet = Date.now() - this.#last;
      if (quiet > 2 * READ_EXPIRES_MS + 4_000) this.#fail(`no message and no pull for ${quiet} ms`);
    }, 1_000);
    this.#timer.unref();
    void this.#watch();
  }

  /** The error this ended the read with (the consumer went quiet), if it did. */
  get error(): LogError | undefined {
    return this.#error;
  }

  alive(): void {
    this.#last = Date.now();
  }

  stop(): void {
    this.#done = true;
    clearInterval(this.#timer);
  }

  async #watch(): Promise<void> {
    try {
      for await (const s of this.messages.status()) {
        if (this.#done) return;
        if (s.type === "next" || s.type === "ordered_consumer_recreated") this.alive();
        else if (s.type === "heartbeats_missed") return this.#fail("the server stopped sending heartbeats");
      }
    } catch {
      // The read ended first.
    }
  }

  #fail(why: string): void {
    if (this.#done) return;
    this.#error = new LogError(
      "unavailable",
      `reading ${this.stream}: ${why} (a cluster member down?); reopen the read`,
    );
    this.stop();
    this.messages.stop(this.#error);
  }
}
