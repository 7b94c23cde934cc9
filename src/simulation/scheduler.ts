/**
 * The simulation's one clock and its one queue of things to do: every timer,
 * message delivery, log ack and fault of a run is an entry here, run in
 * order of simulated time (ties in the order they were scheduled). Nothing
 * else advances time, so a run is a function of its seed.
 */
import type { AgentClock, TimerHandle } from "../agent/client/index.js";

/** An entry of the queue; `cancelled` ones are skipped when their time comes. */
interface Entry {
  at: number;
  order: number;
  fn: () => void;
  cancelled: boolean;
  /** Re-armed this long after it runs (an interval); 0: once. */
  every: number;
}

export class Scheduler {
  #now: number;
  #order = 0;
  /** A binary min-heap on (at, order). */
  readonly #heap: Entry[] = [];
  /** Entries run so far. */
  steps = 0;

  constructor(startMs: number) {
    this.#now = startMs;
  }

  /** Simulated milliseconds since the epoch. */
  get now(): number {
    return this.#now;
  }

  get pending(): number {
    return this.#heap.length;
  }

  /** Runs `fn` `ms` from now (time is whole milliseconds: `ms` is rounded). */
  after(ms: number, fn: () => void): TimerHandle {
    return this.#push(this.#now + Math.max(0, Math.round(ms)), fn, 0);
  }

  /** Runs `fn` every `ms` from now. */
  every(ms: number, fn: () => void): TimerHandle {
    const every = Math.max(1, Math.round(ms));
    return this.#push(this.#now + every, fn, every);
  }

  cancel(t: TimerHandle | undefined): void {
    if (t !== undefined) (t as Entry).cancelled = true;
  }

  /**
   * The next entry due no later than `untilMs`, time moved to it; undefined
   * when none is (time then stands at `untilMs`).
   */
  next(untilMs: number): (() => void) | undefined {
    for (;;) {
      const top = this.#heap[0];
      if (top === undefined || top.at > untilMs) {
        this.#now = Math.max(this.#now, untilMs);
        return undefined;
      }
      this.#pop();
      if (top.cancelled) continue;
      this.#now = top.at;
      this.steps++;
      if (top.every > 0) {
        top.at = this.#now + top.every;
        top.order = ++this.#order;
        this.#insert(top);
      }
      return top.fn;
    }
  }

  /** An agent's clock on this scheduler: simulated time, timers and ids from `newId`. */
  clock(newId: () => string, skewMs = 0): AgentClock {
    return {
      now: () => this.#now + skewMs,
      setTimeout: (fn, ms) => this.after(ms, fn),
      clearTimeout: (t) => this.cancel(t),
      setInterval: (fn, ms) => this.every(ms, fn),
      clearInterval: (t) => this.cancel(t),
      newId,
    };
  }

  #push(at: number, fn: () => void, every: number): Entry {
    const e: Entry = { at, order: ++this.#order, fn, cancelled: false, every };
    this.#insert(e);
    return e;
  }

  #insert(e: Entry): void {
    const h = this.#heap;
    h.push(e);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(e, h[p] as Entry)) break;
      h[i] = h[p] as Entry;
      i = p;
    }
    h[i] = e;
  }

  #pop(): void {
    const h = this.#heap;
    const last = h.pop() as Entry;
    if (h.length === 0) return;
    let i = 0;
    const n = h.length;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && before(h[r] as Entry, h[l] as Entry) ? r : l;
      if (!before(h[c] as Entry, last)) break;
      h[i] = h[c] as Entry;
      i = c;
    }
    h[i] = last;
  }
}

function before(a: Entry, b: Entry): boolean {
  return a.at < b.at || (a.at === b.at && a.order < b.order);
}
