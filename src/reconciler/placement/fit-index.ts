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

/**
 * Every node's fit, indexed. A copy (`copy`) is an overlay: it reads its
 * base's fits and score sets and keeps only what it writes (a fit per node
 * it re-evaluates, a score set copied the first time it changes), so a
 * pass's copy of a kept index costs what the pass changes, not a copy of
 * 50,000 fits. The base must not be written while a copy is in use: a
 * pass's copies live for that pass, and the kept view changes its indexes
 * only before a pass starts (a copy that finds its base changed throws).
 */
export class FitIndex {
  /** How many nodes (positions 0 .. nodes - 1). */
  readonly nodes: number;
  /** Fits by position (a copy: its base's). */
  readonly #fits: Array<NodeFit | undefined>;
  /** The version of the node each fit was evaluated at (-1: none yet; a copy: its base's). */
  readonly #versions: Float64Array;
  /** A copy's own fits and versions by position (null: not a copy). */
  readonly #own: Map<number, { fit: NodeFit; version: number }> | null;
  readonly #base: FitIndex | null;
  /** The base's writes when this copy was made. */
  readonly #baseWrites: number;
  #writes = 0;
  /** How many of FleetView's allocation log entries this index has taken in. */
  seen = 0;
  /** Fitting node positions by score. */
  readonly #byScore: Map<number, Bucket>;
  /** Score sets a copy shares with its base (copied before the copy changes one). */
  readonly #shared: Set<Bucket>;
  /** Scores present, highest first (rebuilt when one appears or goes). */
  #scores: number[] | null = null;
  readonly reasons: Map<string, number>;
  fitCount = 0;

  constructor(nodes: number, from?: FitIndex) {
    this.nodes = nodes;
    if (from) {
      if (from.#base !== null) throw new Error("a copy of a fit index is not copied again");
      this.#fits = from.#fits;
      this.#versions = from.#versions;
      this.#own = new Map();
      this.#base = from;
      this.#baseWrites = from.#writes;
      this.#byScore = new Map(from.#byScore);
      this.#shared = new Set(from.#byScore.values());
      this.#scores = from.#scores;
      this.reasons = new Map(from.reasons);
      this.fitCount = from.fitCount;
      this.seen = from.seen;
      return;
    }
    this.#fits = new Array(nodes);
    this.#versions = new Float64Array(nodes).fill(-1);
    this.#own = null;
    this.#base = null;
    this.#baseWrites = 0;
    this.#byScore = new Map();
    this.#shared = new Set();
    this.reasons = new Map();
  }

  /** A copy: changing it leaves this index as it was (see the class). */
  copy(): FitIndex {
    return new FitIndex(this.nodes, this);
  }

  /** Node `pos`'s fit (undefined: not evaluated yet). */
  fit(pos: number): NodeFit | undefined {
    if (this.#own !== null) {
      this.#checkBase();
      const o = this.#own.get(pos);
      if (o !== undefined) return o.fit;
    }
    return this.#fits[pos];
  }

  /** The version of the node `pos`'s fit was evaluated at (-1: none yet). */
  version(pos: number): number {
    if (this.#own !== null) {
      this.#checkBase();
      const o = this.#own.get(pos);
      if (o !== undefined) return o.version;
    }
    return this.#versions[pos] as number;
  }

  /** Records node `pos`'s fit at `version`, replacing what it had. */
  set(pos: number, version: number, f: NodeFit): void {
    const old = this.fit(pos);
    if (old !== undefined) this.#remove(pos, old);
    if (this.#own !== null) this.#own.set(pos, { fit: f, version });
    else {
      this.#fits[pos] = f;
      this.#versions[pos] = version;
      this.#writes++;
    }
    if (f.ok) {
      this.fitCount++;
      let bucket = this.#byScore.get(f.score);
      if (!bucket) {
        bucket = Bucket.empty(this.nodes);
        this.#byScore.set(f.score, bucket);
        this.#scores = null;
      }
      this.#writable(f.score, bucket).add(pos);
    } else this.reasons.set(f.reason, (this.reasons.get(f.reason) ?? 0) + 1);
  }

  /**
   * Up to `k` fitting node positions, best first: higher score, then lower
   * position (node id order), exactly the order of a full scan.
   */
  best(k: number): number[] {
    if (this.#own !== null) this.#checkBase();
    if (this.#scores === null) this.#scores = [...this.#byScore.keys()].sort((a, b) => b - a);
    const out: number[] = [];
    for (const s of this.#scores) {
      if (out.length === k) break;
      this.#byScore.get(s)?.fill(out, k);
    }
    return out;
  }

  /** The score set to change: a copy's own (copied from its base's the first time). */
  #writable(score: number, bucket: Bucket): Bucket {
    if (!this.#shared.has(bucket)) return bucket;
    this.#shared.delete(bucket);
    const own = bucket.copy();
    this.#byScore.set(score, own);
    return own;
  }

  #checkBase(): void {
    if ((this.#base as FitIndex).#writes !== this.#baseWrites)
      throw new Error("a fit index changed while a copy of it was in use");
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
    const own = this.#writable(f.score, bucket);
    own.delete(pos);
    if (own.size === 0) {
      this.#byScore.delete(f.score);
      this.#scores = null;
    }
  }
}
