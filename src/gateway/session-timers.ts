import type { Input, TimerKind } from "./session-core/index.js";

/**
 * The timers the session core asks for, each fed back to it as a `timer`
 * input. The read deadline is the reader's (session-reader.ts).
 */
export class CoreTimers {
  #usage: NodeJS.Timeout | undefined;
  #ack: NodeJS.Timeout | undefined;

  constructor(
    private readonly feed: (input: Input) => void,
    private readonly ackDelayMs: number,
    /** How long until the usage interval ends (the core's `usageFlushDelayMs`). */
    private readonly usageDelayMs: () => number,
  ) {}

  start(t: TimerKind): void {
    switch (t) {
      case "ack-flush":
        // The log's acks arrive in batches: one flush at the end of the event loop's turn.
        setImmediate(this.#flushAck);
        return;
      case "ack-later":
        clearTimeout(this.#ack);
        this.#ack = setTimeout(this.#flushAckLater, this.ackDelayMs);
        this.#ack.unref();
        return;
      case "usage-flush":
        clearTimeout(this.#usage);
        this.#usage = setTimeout(this.#flushUsage, this.usageDelayMs());
        this.#usage.unref();
        return;
      case "read-deadline":
        return; // armed by the reader at every read
      default: {
        const never: never = t;
        throw new Error(`unknown timer ${String(never)}`);
      }
    }
  }

  clear(): void {
    clearTimeout(this.#usage);
    clearTimeout(this.#ack);
  }

  readonly #flushAck = (): void => {
    // The flush writes what an `ack-later` timer was waiting for too.
    clearTimeout(this.#ack);
    this.feed({ kind: "timer", timer: "ack-flush" });
  };

  readonly #flushAckLater = (): void => this.feed({ kind: "timer", timer: "ack-later" });

  readonly #flushUsage = (): void => this.feed({ kind: "timer", timer: "usage-flush" });
}
