/**
 * The fleet at any point of the log, for the UI's time slider. A jump is
 * folded from the nearest state already known: an in-memory checkpoint
 * (kept every `checkpointEvery` events while folding, and the exact states
 * asked for recently), or the nearest projection snapshot in the store the
 * reconciler and API write; so stepping event by event folds one event, and
 * a jump deep into a long history folds at most a checkpoint interval.
 */
import type { Log } from "../log/index.js";
import { type FleetState, fleetProjection } from "../projections/index.js";
import type { SnapshotStore } from "../projections/runtime/index.js";

export interface FleetHistoryOptions {
  /** Projection snapshots to start from when no checkpoint in memory is nearer. */
  snapshots?: SnapshotStore<FleetState> | undefined;
  /** Keep a checkpoint every this many sequences while folding (default 500). */
  checkpointEvery?: number;
  /** Checkpoints kept in memory; the least recently used go first (default 32). */
  maxCheckpoints?: number;
}

interface Checkpoint {
  seq: number;
  timeMs: number;
  state: FleetState;
  usedAt: number;
}

export class FleetHistory {
  readonly #log: Log;
  readonly #snapshots: SnapshotStore<FleetState> | undefined;
  readonly #every: number;
  readonly #max: number;
  /** Sorted by seq. */
  #checkpoints: Checkpoint[] = [];
  #clock = 0;
  /** Folds in flight, by target, so that two requests for one position fold once. */
  readonly #inflight = new Map<number, Promise<FleetState>>();
  /** Counters for metrics and tests: events folded, and which start each jump used. */
  readonly stats = { folded: 0, fromCheckpoint: 0, fromSnapshot: 0, fromStart: 0 };

  constructor(log: Log, opts: FleetHistoryOptions = {}) {
    this.#log = log;
    this.#snapshots = opts.snapshots;
    this.#every = Math.max(1, opts.checkpointEvery ?? 500);
    this.#max = Math.max(2, opts.maxCheckpoints ?? 32);
  }

  /** The fleet as it was after folding `seq` (clamped to the log's last sequence). The caller must not change it. */
  async at(seq: number): Promise<FleetState> {
    const last = await this.#log.lastSeq();
    const target = Math.max(0, Math.min(seq, last));
    const running = this.#inflight.get(target);
    if (running) return running;
    const p = this.#fold(target).finally(() => this.#inflight.delete(target));
    this.#inflight.set(target, p);
    return p;
  }

  /** The last sequence stored at or before `timeMs` (0 when none). */
  async seqAtTime(timeMs: number): Promise<number> {
    for await (const r of this.#log.read({ fromTimeMs: timeMs + 1 })) {
      return r.seq - 1;
    }
    return this.#log.lastSeq();
  }

  async #fold(target: number): Promise<FleetState> {
    const cp = this.#nearest(target);
    if (cp && cp.seq === target) {
      cp.usedAt = ++this.#clock;
      return cp.state;
    }
    let state: FleetState;
    let from: number;
    const gap = target - (cp?.seq ?? 0);
    const snap =
      this.#snapshots && gap > this.#every
        ? await this.#snapshots.loadNewest(fleetProjection, { maxSeq: target }).catch(() => undefined)
        : undefined;
    if (snap && snap.meta.seq > (cp?.seq ?? 0)) {
      state = snap.state;
      from = snap.meta.seq;
      this.stats.fromSnapshot++;
    } else if (cp) {
      state = structuredClone(cp.state);
      from = cp.seq;
      cp.usedAt = ++this.#clock;
      this.stats.fromCheckpoint++;
    } else {
      state = fleetProjection.initialState();
      from = 0;
      this.stats.fromStart++;
    }
    if (target > from) {
      for await (const r of this.#log.read({ fromSeq: from + 1, untilSeq: target })) {
        state = fleetProjection.evolve(state, r.event, { seq: r.seq, timeMs: r.timeMs });
        this.stats.folded++;
        if (r.seq % this.#every === 0 && r.seq < target) this.#keep(r.seq, r.timeMs, structuredClone(state));
      }
    }
    // The exact state asked for is kept too: the slider asks for its neighbours next.
    this.#keep(target, state.timeMs, state);
    return state;
  }

  #nearest(target: number): Checkpoint | undefined {
    let best: Checkpoint | undefined;
    for (const c of this.#checkpoints) {
      if (c.seq > target) break;
      best = c;
    }
    return best;
  }

  #keep(seq: number, timeMs: number, state: FleetState): void {
    if (this.#checkpoints.some((c) => c.seq === seq)) return;
    this.#checkpoints.push({ seq, timeMs, state, usedAt: ++this.#clock });
    this.#checkpoints.sort((a, b) => a.seq - b.seq);
    while (this.#checkpoints.length > this.#max) {
      let oldest = 0;
      for (let i = 1; i < this.#checkpoints.length; i++) {
        if ((this.#checkpoints[i] as Checkpoint).usedAt < (this.#checkpoints[oldest] as Checkpoint).usedAt)
          oldest = i;
      }
      this.#checkpoints.splice(oldest, 1);
    }
  }
}
