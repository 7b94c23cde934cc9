/**
 * The per-node reconnect limit's memory: each node's bucket on this gateway
 * (the decision is the session core's, `admitRegistration`). Nodes whose
 * bucket is full again are forgotten when the map grows, so its size is
 * bounded by the nodes that registered within about a burst's refill time.
 */
import { admitRegistration, type Bucket, isRested, type RateBudget } from "./session-core/index.js";

/** Past this many nodes remembered, the rested ones are swept out. */
const SWEEP_AT = 4096;

export class ReconnectLimiter {
  readonly #buckets = new Map<string, Bucket>();
  #sweepAt = SWEEP_AT;

  constructor(private readonly budget: RateBudget) {}

  /** A registration of `nodeId` at `at` (monotonic ms): undefined when admitted, else when to retry and why. */
  admit(nodeId: string, at: number): { retryAfterMs: number; detail: string } | undefined {
    const d = admitRegistration(nodeId, this.#buckets.get(nodeId), this.budget, at);
    if (!d.admitted) return { retryAfterMs: d.retryAfterMs, detail: d.detail };
    this.#buckets.set(nodeId, d.bucket);
    if (this.#buckets.size >= this.#sweepAt) this.#sweep(at);
    return undefined;
  }

  get size(): number {
    return this.#buckets.size;
  }

  #sweep(at: number): void {
    for (const [node, b] of this.#buckets) if (isRested(b, this.budget, at)) this.#buckets.delete(node);
    // Many nodes still within their window: sweep again only once the map doubled.
    this.#sweepAt = Math.max(SWEEP_AT, this.#buckets.size * 2);
  }
}
