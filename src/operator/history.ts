/**
 * The fleet at any point of the log, for the UI's time slider. A jump is
 * folded from the nearest state already known:
 * - anchors: states kept at evenly spaced sequences while folding (every
 *   `checkpointEvery` at first; when there are more than `maxAnchors`, the
 *   spacing doubles and every other one goes, so memory stays bounded and a
 *   jump anywhere folds at most one spacing of events);
 * - recent: the exact states asked for lately (the slider asks for their
 *   neighbours next; least recently used go first);
 * - or the nearest projection snapshot in the store the reconciler writes,
 *   when that is nearer.
 * `prefill()` folds the whole log once in the background so the anchors
 * exist before the first jump.
 */
import type { Log } from "../log/index.js";
import { cloneFleet, type FleetState, fleetProjection } from "../projections/index.js";
import { loadNearestSnapshot, type SnapshotStore } from "../projections/runtime/index.js";

export interface FleetHistoryOptions {
  /** Projection snapshots to start from when no state in memory is nearer. */
  snapshots?: SnapshotStore<FleetState> | undefined;
  /** The first spacing of anchors, in sequences (default 500). */
  checkpointEvery?: number;
  /** Anchors kept at most (default 32). */
  maxAnchors?: number;
  /** Exact states kept for positions asked lately (default 16). */
  maxRecent?: number;
}

interface Held {
  seq: number;
  state: FleetState;
  usedAt: number;
}

export class FleetHistory {
  readonly #log: Log;
  readonly #snapshots: SnapshotStore<FleetState> | undefined;
  #spacing: number;
  readonly #maxAnchors: number;
  readonly #maxRecent: number;
  /** Sorted by seq, each a multiple of #spacing. */
  #anchors: Held[] = [];
  #recent: Held[] = [];
  #clock = 0;
  /** Folds in flight, by target, so that two requests for one position fold once. */
  readonly #inflight = new Map<number, Promise<FleetState>>();
  /** Counters for metrics and tests: events folded, and where each jump started. */
  readonly stats = { folded: 0, fromMemory: 0, fromSnapshot: 0, fromStart: 0 };

  constructor(log: Log, opts: FleetHistoryOptions = {}) {
    this.#log = log;
    this.#snapshots = opts.snapshots;
    this.#spacing = Math.max(1, opts.checkpointEvery ?? 500);
    this.#maxAnchors = Math.max(2, opts.maxAnchors ?? 32);
    this.#maxRecent = Math.max(1, opts.maxRecent ?? 16);
  }

  /** Current spacing of the anchors (grows as the log does). */
  get spacing(): number {
    return this.#spacing;
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

  /** Folds the log as it is now, keeping anchors along the way (call once at start, in the background). */
  async prefill(): Promise<void> {
    await this.at(await this.#log.lastSeq());
  }

  /** The last sequence stored at or before `timeMs` (0 when none). */
  async seqAtTime(timeMs: number): Promise<number> {
    for await (const r of this.#log.read({ fromTimeMs: timeMs + 1 })) {
      return r.seq - 1;
    }
    return this.#log.lastSeq();
  }

  async #fold(target: number): Promise<FleetState> {
    const held = this.#nearest(target);
    if (held && held.seq === target) {
      held.usedAt = ++this.#clock;
      return held.state;
    }
    let state: FleetState;
    let from: number;
    const gap = target - (held?.seq ?? 0);
    // The KV snapshots, or the archive's when the start lies there.
    const snap =
      gap > this.#spacing
        ? await loadNearestSnapshot(this.#log, fleetProjection, this.#snapshots, { maxSeq: target }).catch(
            () => undefined,
          )
        : undefined;
    if (snap && snap.meta.seq > (held?.seq ?? 0)) {
      state = snap.state;
      from = snap.meta.seq;
      this.stats.fromSnapshot++;
    } else if (held) {
      // Folds change the state in place: never fold a held one.
      state = cloneFleet(held.state);
      from = held.seq;
      held.usedAt = ++this.#clock;
      this.stats.fromMemory++;
    } else {
      state = fleetProjection.initialState();
      from = 0;
      this.stats.fromStart++;
    }
    if (target > from) {
      for await (const r of this.#log.read({ fromSeq: from + 1, untilSeq: target })) {
        state = fleetProjection.evolve(state, r.event, { seq: r.seq, timeMs: r.timeMs });
        this.stats.folded++;
        if (r.seq % this.#spacing === 0 && r.seq < target) this.#anchor(r.seq, cloneFleet(state));
      }
    }
    if (target > 0 && target % this.#spacing === 0) this.#anchor(target, cloneFleet(state));
    this.#remember(target, state);
    return state;
  }

  #nearest(target: number): Held | undefined {
    let best: Held | undefined;
    for (const list of [this.#anchors, this.#recent]) {
      for (const h of list) if (h.seq <= target && (!best || h.seq > best.seq)) best = h;
    }
    return best;
  }

  #anchor(seq: number, state: FleetState): void {
    if (this.#anchors.some((a) => a.seq === seq)) return;
    this.#anchors.push({ seq, state, usedAt: 0 });
    this.#anchors.sort((a, b) => a.seq - b.seq);
    while (this.#anchors.length > this.#maxAnchors) {
      // Twice the spacing, half the anchors: still evenly spaced over the whole log.
      this.#spacing *= 2;
      this.#anchors = this.#anchors.filter((a) => a.seq % this.#spacing === 0);
    }
  }

  #remember(seq: number, state: FleetState): void {
    if (this.#recent.some((r) => r.seq === seq)) return;
    this.#recent.push({ seq, state, usedAt: ++this.#clock });
    if (this.#recent.length > this.#maxRecent) {
      let oldest = 0;
      for (let i = 1; i < this.#recent.length; i++) {
        if ((this.#recent[i] as Held).usedAt < (this.#recent[oldest] as Held).usedAt) oldest = i;
      }
      this.#recent.splice(oldest, 1);
    }
  }
}
