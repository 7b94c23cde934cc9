import type { Heartbeat, Register } from "../gen/llmgw/v1/agent_pb.js";

/**
 * Problems remembered per session. An agent that reports a new problem on
 * every heartbeat gets an event for each (that is the rule), but the
 * gateway's memory of them stays bounded: past this the oldest are
 * forgotten, and one reported again is recorded again (conservative).
 */
export const REMEMBERED_PROBLEMS = 4096;

/**
 * Decides which heartbeats are worth an event. A heartbeat only keeps a
 * session alive unless a GPU's memory use moved by more than the threshold
 * since the last recorded figure, the number of GPUs reported changed, or a
 * problem not yet reported on this session appears.
 */
export class UsageTracker {
  #recorded: bigint[];
  readonly #problems = new Set<string>();

  constructor(
    private readonly thresholdMb: number,
    registration: Register,
  ) {
    this.#recorded = registration.gpus.map((g) => g.memoryUsedMb);
    for (const g of registration.gpus) for (const p of g.problems) this.#remember(p);
  }

  /** How many problems this session remembers. */
  get rememberedProblems(): number {
    return this.#problems.size;
  }

  /** A re-registration resets the baseline to what the agent now reports. */
  reset(registration: Register): void {
    this.#recorded = registration.gpus.map((g) => g.memoryUsedMb);
    for (const g of registration.gpus) for (const p of g.problems) this.#remember(p);
  }

  /** True when `hb` should become a usage event; the baseline moves to it then. */
  observe(hb: Heartbeat): boolean {
    const fresh = hb.newProblems.filter((p) => !this.#problems.has(p));
    const used = hb.gpuMemoryUsedMb;
    const threshold = BigInt(this.thresholdMb);
    let moved = used.length > 0 && used.length !== this.#recorded.length;
    for (let i = 0; !moved && i < used.length; i++) {
      const now = used[i] ?? 0n;
      const before = this.#recorded[i] ?? 0n;
      const delta = now > before ? now - before : before - now;
      if (delta > threshold) moved = true;
    }
    if (!moved && fresh.length === 0) return false;
    if (used.length > 0) this.#recorded = [...used];
    for (const p of fresh) this.#remember(p);
    return true;
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
