import type { GpuProblem, Register, ShardLoad } from "../gen/llmgw/v1/agent_pb.js";

/**
 * When a shard's load is worth a usage event (documented in
 * docs/gateway.md): its queue depth moved by at least 2 requests and 10% of
 * the recorded depth, or its KV-cache use by at least 0.05, or the set of
 * shards reporting load changed. Smaller moves are noise to an autoscaler
 * whose tolerance band is wider; they never reach the log.
 */
export const LOAD_THRESHOLDS = Object.freeze({ queueDepth: 2, queueDepthShare: 0.1, kvCacheUse: 0.05 });

/**
 * Problems remembered per session. The gateway's memory of them stays
 * bounded whatever an agent reports: past this the oldest are forgotten,
 * and one reported again is recorded again (conservative).
 */
export const REMEMBERED_PROBLEMS = 4096;

/**
 * What the log last has of one session's usage: the memory figures of the
 * last recorded usage (the registration's, then the last usage event's), the
 * GPUs the node listed, and the problems already reported. A heartbeat is
 * worth a usage event when a GPU's memory use moved by more than the
 * threshold since the recorded figures, the number of GPUs reported changed,
 * or a problem (node-level or of one GPU) not yet reported on this session
 * appears, or a shard's load moved past `LOAD_THRESHOLDS`. An agent repeating a problem on every heartbeat does not grow the
 * log. When the event is written is the session core's (`usage-window.ts`).
 */
export class UsageTracker {
  #recorded: bigint[];
  #gpus: Set<number>;
  readonly #problems = new Set<string>();
  /** The shard load the log last has from this session, by shard id. */
  #load = new Map<string, { queueDepth: number; kvCacheUse: number }>();

  constructor(
    private readonly thresholdMb: number,
    registration: Register,
  ) {
    this.#recorded = registration.gpus.map((g) => g.memoryUsedMb);
    this.#gpus = new Set(registration.gpus.map((g) => g.index));
    this.#rememberRegistered(registration);
  }

  /** How many problems this session remembers. */
  get rememberedProblems(): number {
    return this.#problems.size;
  }

  /** A re-registration resets the baseline to what the agent now reports. */
  reset(registration: Register): void {
    this.#recorded = registration.gpus.map((g) => g.memoryUsedMb);
    this.#gpus = new Set(registration.gpus.map((g) => g.index));
    this.#rememberRegistered(registration);
  }

  /** The registration lists GPU `index` (a problem of another GPU is dropped). */
  lists(index: number): boolean {
    return this.#gpus.has(index);
  }

  /** Node-level problem `p` was already reported on this session. */
  knowsNode(p: string): boolean {
    return this.#problems.has(p);
  }

  knowsGpu(p: GpuProblem): boolean {
    return this.#problems.has(gpuProblemKey(p));
  }

  /** `p` is reported (written, or waiting to be): it is not new again. */
  rememberNode(p: string): void {
    this.#remember(p);
  }

  rememberGpu(p: GpuProblem): void {
    this.#remember(gpuProblemKey(p));
  }

  /** Memory figures `used` differ from the recorded ones by more than the threshold (or in GPU count). */
  moved(used: readonly bigint[]): boolean {
    if (used.length === 0) return false;
    if (used.length !== this.#recorded.length) return true;
    const threshold = BigInt(this.thresholdMb);
    for (let i = 0; i < used.length; i++) {
      const now = used[i] ?? 0n;
      const before = this.#recorded[i] ?? 0n;
      const delta = now > before ? now - before : before - now;
      if (delta > threshold) return true;
    }
    return false;
  }

  /** Shard load `load` differs from the recorded load past the thresholds (or in its shards). */
  loadMoved(load: readonly ShardLoad[]): boolean {
    if (load.length === 0) return false;
    if (load.length !== this.#load.size) return true;
    for (const l of load) {
      const before = this.#load.get(l.shardId);
      if (!before) return true;
      const dq = Math.abs(l.queueDepth - before.queueDepth);
      if (dq >= LOAD_THRESHOLDS.queueDepth && dq >= LOAD_THRESHOLDS.queueDepthShare * before.queueDepth)
        return true;
      if (Math.abs(l.kvCacheUse - before.kvCacheUse) >= LOAD_THRESHOLDS.kvCacheUse) return true;
    }
    return false;
  }

  /** A usage event with `used` (and `load`, when it carries load) is written: the baseline moves to it. */
  record(used: readonly bigint[], load: readonly ShardLoad[] = []): void {
    if (used.length > 0) this.#recorded = [...used];
    if (load.length > 0)
      this.#load = new Map(
        load.map((l) => [l.shardId, { queueDepth: l.queueDepth, kvCacheUse: l.kvCacheUse }]),
      );
  }

  #rememberRegistered(registration: Register): void {
    for (const g of registration.gpus) for (const p of g.problems) this.#remember(p);
  }

  #remember(problem: string): void {
    this.#problems.add(problem);
    // A Set iterates in insertion order: the first is the oldest.
    if (this.#problems.size > REMEMBERED_PROBLEMS) {
      const oldest = this.#problems.values().next();
      if (!oldest.done) this.#problems.delete(oldest.value);
    }
  }
}

/** One key per distinct GPU problem; the NUL keeps it apart from any node-level problem text. */
function gpuProblemKey(p: GpuProblem): string {
  return `\u0000gpu ${p.gpuIndex} ${p.kind}\u0000${p.message}`;
}
