/**
 * Every node's fit for one model/profile, indexed so that placing a replica
 * looks up its best candidates instead of scoring every node again: fitting
 * nodes by score (each score's nodes in node order), and how many nodes each
 * reason rules out (for a pending explanation). Built once (one fit per
 * node), then kept up to date with the nodes that change, so a pass placing
 * many replicas costs one fit per changed node per placement.
 *
 * Each score's nodes are a bit set over node positions, not a sorted list:
 * a placement moves a node from one score to another, and removing the
 * first entry of a sorted list of thousands shifts all the others (a full
 * placement did that once per replica per profile: quadratic in the fleet).
 * A bit set adds and removes in constant time and still lists its nodes in
 * position order; a summary word per 32 words skips the empty stretches.
 */
import type { NodeFit } from "./fit.js";

/** Positions `pos` of one score, as bits. */
class Bucket {
  size = 0;
  constructor(
    readonly words: Uint32Array,
    /** Bit w set: words[w] is not 0. */
    readonly summary: Uint32Array,
  ) {}

  static empty(nodes: number): Bucket {
    const words = Math.ceil(nodes / 32);
    return new Bucket(new Uint32Array(words), new Uint32Array(Math.ceil(words / 32)));
  }

  copy(): Bucket {
    const b = new Bucket(this.words.slice(), this.summary.slice());
    b.size = this.size;
    return b;
  }

  add(pos: number): void {
    const w = pos >>> 5;
    const bit = 1 << (pos & 31);
    if ((this.words[w] as number) & bit) return;
    this.words[w] = (this.words[w] as number) | bit;
    this.summary[w >>> 5] = (this.summary[w >>> 5] as number) | (1 << (w & 31));
    this.size++;
  }

  delete(pos: number): void {
    const w = pos >>> 5;
    const bit = 1 << (pos & 31);
    if (!((this.words[w] as number) & bit)) return;
    this.words[w] = (this.words[w] as number) & ~bit;
    if (this.words[w] === 0) this.summary[w >>> 5] = (this.summary[w >>> 5] as number) & ~(1 << (w & 31));
    this.size--;
  }

  /** Appends positions in ascending order to `out` until it holds `k`. */
  fill(out: number[], k: number): void {
    for (let s = 0; s < this.summary.length; s++) {
      let sw = this.summary[s] as number;
      while (sw !== 0) {
        const low = sw & -sw;
        const w = s * 32 + (31 - Math.clz32(low));
        sw ^= low;
        let word = this.words[w] as number;
        while (word !== 0) {
          if (out.length === k) return;
          const b = word & -word;
          out.push(w * 32 + (31 - Math.clz32(b)));
          word ^= b;
        }
      }
    }
  }
}

export class FitIndex {
  readonly fits: Array<NodeFit | undefined>;
  /** The version of the node each fit was evaluated at (-1: none yet). */
  readonly versions: Float64Array;
  /** How many of FleetView's allocation log entries this index has taken in. */
  seen = 0;
  /** Fitting node positions by score. */
  readonly #byScore: Map<number, Bucket>;
  /** Scores present, highest first (rebuilt when one appears or goes). */
  #scores: number[] | null = null;
  readonly reasons: Map<string, number>;
  fitCount = 0;

  constructor(nodes: number, from?: FitIndex) {
    if (from) {
      this.fits = from.fits.slice();
      this.versions = from.versions.slice();
      this.#byScore = new Map([...from.#byScore].map(([s, b]) => [s, b.copy()]));
      this.#scores = from.#scores;
      this.reasons = new Map(from.reasons);
      this.fitCount = from.fitCount;
      this.seen = from.seen;
      return;
    }
    this.fits = new Array(nodes);
    this.versions = new Float64Array(nodes).fill(-1);
    this.#byScore = new Map();
    this.reasons = new Map();
  }

  /** An independent copy: changing either leaves the other as it was. */
  copy(): FitIndex {
    return new FitIndex(this.fits.length, this);
  }

  /** Records node `pos`'s fit at `version`, replacing what it had. */
  set(pos: number, version: number, f: NodeFit): void {
    const old = this.fits[pos];
    if (old !== undefined) this.#remove(pos, old);
    this.fits[pos] = f;
    this.versions[pos] = version;
    if (f.ok) {
      this.fitCount++;
      let bucket = this.#byScore.get(f.score);
      if (!bucket) {
        bucket = Bucket.empty(this.fits.length);
        this.#byScore.set(f.score, bucket);
        this.#scores = null;
      }
      bucket.add(pos);
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
      if (out.length === k) break;
      this.#byScore.get(s)?.fill(out, k);
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
    const bucket = this.#byScore.get(f.score);
    if (!bucket) return;
    bucket.delete(pos);
    if (bucket.size === 0) {
      this.#byScore.delete(f.score);
      this.#scores = null;
    }
  }
}
