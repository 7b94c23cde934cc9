/**
 * When the next pass is due. Passes are level-triggered: any reason to look
 * again (new events, a new catalog, a deadline decide asked for, the
 * periodic tick, a truncated pass, startup) makes one pass due, and one pass
 * handles them all.
 *
 * - events: debounced (`debounceMs` after the last event), but never later
 *   than `maxDelayMs` after the first one of a burst, so a steady stream of
 *   events cannot starve the reconciler.
 * - deadline: a wall-clock time from decide (`nextDeadlineMs`).
 * - tick: every `tickMs`, a safety net for anything missed.
 * - a hold (error backoff) delays whatever is due until it ends.
 */
export type Trigger = "startup" | "events" | "catalog" | "deadline" | "tick" | "truncated";

export interface TriggerOptions {
  debounceMs: number;
  maxDelayMs: number;
  tickMs: number;
}

export const DEFAULT_TRIGGER_OPTIONS: TriggerOptions = { debounceMs: 100, maxDelayMs: 1000, tickMs: 10_000 };

interface Due {
  trigger: Trigger;
  /** Monotonic ms. */
  at: number;
}

export class PassTriggers {
  #firstEventAt: number | null = null;
  #lastEventAt = 0;
  #immediate: Trigger | null = null;
  #deadlineWallMs: number | null = null;
  #nextTickAt: number;
  #holdUntil = 0;
  #timer: NodeJS.Timeout | undefined;
  #waiter: ((t: Trigger | null) => void) | null = null;
  #closed = false;

  constructor(
    private readonly opts: TriggerOptions,
    private readonly now: () => number,
    private readonly wallNow: () => number = Date.now,
  ) {
    this.#nextTickAt = now() + opts.tickMs;
  }

  /** New events were folded. */
  events(): void {
    const t = this.now();
    if (this.#firstEventAt === null) this.#firstEventAt = t;
    this.#lastEventAt = t;
    this.#arm();
  }

  /** A pass is due at once (startup, a new catalog, a truncated pass). */
  request(trigger: Trigger): void {
    if (this.#immediate === null || trigger === "startup") this.#immediate = trigger;
    this.#arm();
  }

  /** The earliest deadline decide reported (wall-clock ms), or null. Replaces the previous one. */
  deadline(wallMs: number | null): void {
    this.#deadlineWallMs = wallMs;
    this.#arm();
  }

  /** Nothing is due before `ms` from now (error backoff). */
  hold(ms: number): void {
    this.#holdUntil = this.now() + ms;
    this.#arm();
  }

  /** Forget everything pending (on stepping down). */
  reset(): void {
    this.#firstEventAt = null;
    this.#immediate = null;
    this.#deadlineWallMs = null;
    this.#holdUntil = 0;
    this.#nextTickAt = this.now() + this.opts.tickMs;
    this.#arm();
  }

  /**
   * Resolves with the reason of the next due pass (the reasons it covers are
   * consumed), or with null when interrupted.
   */
  next(): Promise<Trigger | null> {
    if (this.#waiter) throw new Error("only one waiter at a time");
    return new Promise((resolve) => {
      this.#waiter = resolve;
      this.#arm();
    });
  }

  /** Resolves a pending `next()` with null, consuming nothing (leadership changed). */
  interrupt(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    const w = this.#waiter;
    this.#waiter = null;
    w?.(null);
  }

  /** Interrupts and never fires again (shutdown). */
  close(): void {
    this.#closed = true;
    this.interrupt();
  }

  #due(): Due {
    const candidates: Due[] = [{ trigger: "tick", at: this.#nextTickAt }];
    if (this.#immediate !== null) candidates.push({ trigger: this.#immediate, at: 0 });
    if (this.#firstEventAt !== null) {
      const at = Math.min(
        this.#lastEventAt + this.opts.debounceMs,
        this.#firstEventAt + this.opts.maxDelayMs,
      );
      candidates.push({ trigger: "events", at });
    }
    if (this.#deadlineWallMs !== null) {
      candidates.push({ trigger: "deadline", at: this.now() + (this.#deadlineWallMs - this.wallNow()) });
    }
    candidates.sort((a, b) => a.at - b.at);
    const first = candidates[0]!;
    return { trigger: first.trigger, at: Math.max(first.at, this.#holdUntil) };
  }

  #arm(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (!this.#waiter || this.#closed) return;
    const due = this.#due();
    const wait = due.at - this.now();
    if (wait <= 0) {
      this.#fire(due.trigger);
      return;
    }
    // A timer fires a little late, never early in a way that matters: re-check on wake.
    this.#timer = setTimeout(() => this.#arm(), Math.min(wait + 1, 2 ** 31 - 1));
  }

  #fire(trigger: Trigger): void {
    const w = this.#waiter;
    this.#waiter = null;
    // One pass covers every reason that is due now.
    const t = this.now();
    this.#immediate = null;
    this.#firstEventAt = null;
    this.#holdUntil = 0;
    if (this.#deadlineWallMs !== null && this.#deadlineWallMs <= this.wallNow()) this.#deadlineWallMs = null;
    this.#nextTickAt = t + this.opts.tickMs;
    w?.(trigger);
  }
}
