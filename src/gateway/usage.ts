import type { GpuProblem, Heartbeat, Register } from "../gen/llmgw/v1/agent_pb.js";

/**
 * Problems remembered per session. An agent that reports a new problem on
 * every heartbeat gets an event for each (that is the rule), but the
 * gateway's memory of them stays bounded: past this the oldest are
 * forgotten, and one reported again is recorded again (conservative).
 */
export const REMEMBERED_PROBLEMS = 4096;

/** What a heartbeat amounts to. */
export interface Observation {
  /** The heartbeat is worth a usage event. */
  record: boolean;
  /** GPU problems new to this session, on GPUs the node registered: the event carries these. */
  gpuProblems: GpuProblem[];
  /**
   * GPU problems naming a GPU the registration does not list. Dropped (the
   * gateway warns): there is nothing in placement to take out, and like a
   * shard on an unlisted GPU it is what an agent may say when a GPU fell off
   * the bus, so it does not end the session.
   */
  unknownGpu: GpuProblem[];
}

/**
 * Decides which heartbeats are worth an event. A heartbeat only keeps a
 * session alive unless a GPU's memory use moved by more than the threshold
 * since the last recorded figure, the number of GPUs reported changed, or a
 * problem (node-level or of one GPU) not yet reported on this session
 * appears. An agent repeating a GPU problem on every heartbeat does not grow
 * the log.
 */
export class UsageTracker {
  #recorded: bigint[];
  #gpus: Set<number>;
  readonly #problems = new Set<string>();

  constructor(
    private readonly thresholdMb: number,
    registration: Register,
  ) {
    this.#recorded = registration.gpus.map((g) => g.memoryUsedMb);
    this.#gpus = new Set(registration.gpus.map((g) => g.index));
    for (const g of registration.gpus) for (const p of g.problems) this.#remember(p);
  }

  /** How many problems this session remembers. */
  get rememberedProblems(): number {
    return this.#problems.size;
  }

  /** A re-registration resets the baseline to what the agent now reports. */
  reset(registration: Register): void {
    this.#recorded = registration.gpus.map((g) => g.memoryUsedMb);
    this.#gpus = new Set(registration.gpus.map((g) => g.index));
    for (const g of registration.gpus) for (const p of g.problems) this.#remember(p);
  }

  /** What `hb` amounts to; when it is recorded, the baseline moves to it. */
  observe(hb: Heartbeat): Observation {
    const fresh = hb.newProblems.filter((p) => !this.#problems.has(p));
    const gpuProblems: GpuProblem[] = [];
    const unknownGpu: GpuProblem[] = [];
    const keys = new Set<string>();
    for (const p of hb.gpuProblems) {
      if (!this.#gpus.has(p.gpuIndex)) {
        unknownGpu.push(p);
        continue;
      }
      const key = gpuProblemKey(p);
      if (this.#problems.has(key) || keys.has(key)) continue;
      keys.add(key);
      gpuProblems.push(p);
    }
    const used = hb.gpuMemoryUsedMb;
    const threshold = BigInt(this.thresholdMb);
    let moved = used.length > 0 && used.length !== this.#recorded.length;
    for (let i = 0; !moved && i < used.length; i++) {
      const now = used[i] ?? 0n;
      const before = this.#recorded[i] ?? 0n;
      const delta = now > before ? now - before : before - now;
      if (delta > threshold) moved = true;
    }
    if (!moved && fresh.length === 0 && gpuProblems.length === 0) {
      return { record: false, gpuProblems, unknownGpu };
    }
    if (used.length > 0) this.#recorded = [...used];
    for (const p of fresh) this.#remember(p);
    for (const k of keys) this.#remember(k);
    return { record: true, gpuProblems, unknownGpu };
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
