/**
 * The simulation's one clock and its one queue of things to do: every timer,
 * message delivery, log ack and fault of a run is an entry here, run in
 * order of simulated time (ties in the order they were scheduled). Nothing
 * else advances time, so a run is a function of its seed.
 */
import type { AgentClock, TimerHandle } from "../agent/client/index.js";

/** An entry of the queue; `cancelled` ones are skipped when their time comes. */
interface Entry {
  fn: () => void;
  cancelled: boolean;
  /** Re-armed this long after it runs (an interval); 0: once. */
  every: number;
}

/**
 * The queue is a 4-ary min-heap on (at, order): half the levels of a
 * binary one, and the keys of the entries sit in two typed arrays beside
 * them, so the comparisons of a step read packed numbers, not objects
 * spread over the heap (at 1,000 nodes the queue holds ~6,000 entries, and
 * taking the next was a tenth of the run). `order` is unique, so no two
 * keys are equal: the order of a run is the same as with any other heap.
 */
const ARITY = 4;

export class Scheduler {
  #now: number;
  #order = 0;
  #entries: Entry[] = [];
  #at = new Float64Array(1024);
  #ord = new Float64Array(1024);
  #size = 0;
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
    return this.#size;
  }

  /** Runs `fn` `ms` from now (time is whole milliseconds: `ms` is rounded). */
  after(ms: number, fn: () => void): TimerHandle {
    const e: Entry = { fn, cancelled: false, every: 0 };
    this.#insert(e, this.#now + Math.max(0, Math.round(ms)));
    return e;
  }

  /** Runs `fn` every `ms` from now. */
  every(ms: number, fn: () => void): TimerHandle {
    const every = Math.max(1, Math.round(ms));
    const e: Entry = { fn, cancelled: false, every };
    this.#insert(e, this.#now + every);
    return e;
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
      if (this.#size === 0 || this.#at[0]! > untilMs) {
        this.#now = Math.max(this.#now, untilMs);
        return undefined;
      }
      const at = this.#at[0]!;
      const top = this.#pop();
      if (top.cancelled) continue;
      this.#now = at;
      this.steps++;
      if (top.every > 0) this.#insert(top, at + top.every);
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

  #insert(e: Entry, at: number): void {
    const order = ++this.#order;
    if (this.#size === this.#at.length) this.#grow();
    const ats = this.#at;
    const ords = this.#ord;
    const entries = this.#entries;
    let i = this.#size++;
    while (i > 0) {
      const p = ((i - 1) / ARITY) | 0;
      const pa = ats[p]!;
      if (pa < at || (pa === at && ords[p]! < order)) break;
      ats[i] = pa;
      ords[i] = ords[p]!;
      entries[i] = entries[p]!;
      i = p;
    }
    ats[i] = at;
    ords[i] = order;
    entries[i] = e;
  }

  /** Takes the first entry off the heap. */
  #pop(): Entry {
    const ats = this.#at;
    const ords = this.#ord;
    const entries = this.#entries;
    const top = entries[0]!;
    const n = --this.#size;
    const at = ats[n]!;
    const order = ords[n]!;
    const last = entries[n]!;
    entries[n] = undefined as unknown as Entry;
    if (n === 0) return top;
    let i = 0;
    for (;;) {
      const first = ARITY * i + 1;
      if (first >= n) break;
      // The least of the children.
      let c = first;
      let ca = ats[first]!;
      let co = ords[first]!;
      const end = Math.min(first + ARITY, n);
      for (let k = first + 1; k < end; k++) {
        const ka = ats[k]!;
        if (ka < ca || (ka === ca && ords[k]! < co)) {
          c = k;
          ca = ka;
          co = ords[k]!;
        }
      }
      if (at < ca || (at === ca && order < co)) break;
      ats[i] = ca;
      ords[i] = co;
      entries[i] = entries[c]!;
      i = c;
    }
    ats[i] = at;
    ords[i] = order;
    entries[i] = last;
    return top;
  }

  #grow(): void {
    const ats = new Float64Array(this.#at.length * 2);
    ats.set(this.#at);
    const ords = new Float64Array(this.#ord.length * 2);
    ords.set(this.#ord);
    this.#at = ats;
    this.#ord = ords;
  }
}
