/**
 * Every node's fit for one model/profile during a pass, indexed so that
 * placing a replica looks up its best candidates instead of scoring every
 * node again: fitting nodes by score (each score's nodes in node order),
 * and how many nodes each reason rules out (for a pending explanation).
 * Built once per model/profile per pass (one fit per node), then kept up to
 * date with the nodes the pass allocates on, so a pass placing many
 * replicas costs one fit per changed node per placement.
 */
import type { NodeFit } from "./fit.js";

export class FitIndex {
  readonly fits: Array<NodeFit | undefined>;
  readonly versions: Int32Array;
  /** How many of FleetView's allocation log entries this index has taken in. */
  seen = 0;
  /** Fitting node positions by score, each list ascending. */
  readonly #byScore = new Map<number, number[]>();
  /** Scores present, highest first (rebuilt when one appears or goes). */
  #scores: number[] | null = [];
  readonly reasons = new Map<string, number>();
  fitCount = 0;

  constructor(nodes: number) {
    this.fits = new Array(nodes);
    this.versions = new Int32Array(nodes).fill(-1);
  }

  /** Records node `pos`'s fit at `version`, replacing what it had. */
  set(pos: number, version: number, f: NodeFit): void {
    const old = this.fits[pos];
    if (old !== undefined) this.#remove(pos, old);
    this.fits[pos] = f;
    this.versions[pos] = version;
    if (f.ok) {
      this.fitCount++;
      let list = this.#byScore.get(f.score);
      if (!list) {
        list = [];
        this.#byScore.set(f.score, list);
        this.#scores = null;
      }
      list.splice(lowerBound(list, pos), 0, pos);
    } else this.reasons.set(f.reason, (this.reasons.get(f.reason) ?? 0) + 1);
  }

  /**
   * Up to `k` fitting node positions, best first: higher score, then lower
   * position (node id order), exactly the order of a full scan.
   */
  best(k: number): number[] {
    if (this.#scores === null) this.#scores = [...this.#byScore.keys()].sort((a, b) => b - a);
    const out: number[] = [];
    for (const s of this.#scores) {
      for (const pos of this.#byScore.get(s) ?? []) {
        if (out.length === k) return out;
        out.push(pos);
      }
    }
    return out;
  }

  #remove(pos: number, f: NodeFit): void {
    if (!f.ok) {
      const n = (this.reasons.get(f.reason) ?? 0) - 1;
      if (n > 0) this.reasons.set(f.reason, n);
      else this.reasons.delete(f.reason);
      return;
    }
    this.fitCount--;
    const list = this.#byScore.get(f.score);
    if (!list) return;
    const i = lowerBound(list, pos);
    if (list[i] === pos) list.splice(i, 1);
    if (list.length === 0) {
      this.#byScore.delete(f.score);
      this.#scores = null;
    }
  }
}

function lowerBound(list: readonly number[], x: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((list[mid] as number) < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
