/**
 * What the agent makes of its GPU samples over time: which GPUs the node has
 * now (a GPU that left, came back or was swapped calls for a
 * re-registration), which problems are new occurrences, and when nvidia-smi
 * failing has become a node problem.
 *
 * GPUs keep the index they were registered with: nvidia-smi numbers the GPUs
 * it lists from 0, so after one falls off the bus the ones behind it move
 * up; the watch knows them by their slot (PCI bus id) instead.
 *
 * A problem is reported once per occurrence, and the occurrences already
 * reported are kept in the agent's state directory: an operator's
 * `llmgw gpu clear` stays cleared through reconnects and agent restarts,
 * and the same problem is reported again only when it happens again — a
 * new Xid logged, a counter that rises, a condition that went away and came
 * back. No clock and no I/O here: the store is handed in.
 */
import type {
  GpuInit,
  GpuProblemInit,
  GpuSample,
  GpuSeen,
  NodeHardwareInventory,
  SampledProblem,
} from "./node-agent.js";

/** The occurrences already reported, as kept between agent runs. */
export interface ProblemLedgerData {
  /** `<uuid> <signal>` → the level last seen of a condition (absent: not present). */
  levels: Record<string, number>;
  /** `<uuid> <signal>` of the events (Xids) already reported, oldest first. */
  events: string[];
}

export interface ProblemLedgerStore {
  load(): ProblemLedgerData | undefined;
  save(data: ProblemLedgerData): void;
}

/** Events remembered: a kernel log holds far fewer Xid lines than this. */
const MAX_EVENTS = 2000;

export type GpuChangeKind = "gone" | "back" | "swapped" | "new";

export interface GpuChange {
  index: number;
  uuid: string;
  kind: GpuChangeKind;
  /** The UUID before, for a swapped GPU. */
  previousUuid?: string;
}

export interface SampleOutcome {
  /** GPUs that left, came back, were swapped or appeared: the registration is out of date. */
  changes: GpuChange[];
  /** New occurrences, on the GPUs' registered indices. */
  problems: GpuProblemInit[];
}

interface TrackedGpu {
  index: number;
  slot: string;
  gpu: GpuInit;
  memoryUsedMb: number;
  present: boolean;
}

export interface HardwareWatchOptions {
  /** nvidia-smi failing this many samples in a row is a node problem. */
  failureThreshold: number;
  store?: ProblemLedgerStore;
}

export class HardwareWatch {
  readonly #gpus: TrackedGpu[];
  readonly #levels: Map<string, number>;
  readonly #events: string[];
  readonly #eventSet: Set<string>;
  readonly #o: HardwareWatchOptions;
  readonly #initial: GpuProblemInit[];
  #failures = 0;

  constructor(inventory: NodeHardwareInventory, o: HardwareWatchOptions) {
    this.#o = o;
    const saved = o.store?.load();
    this.#levels = new Map(Object.entries(saved?.levels ?? {}));
    this.#events = [...(saved?.events ?? [])];
    this.#eventSet = new Set(this.#events);
    this.#gpus = inventory.gpus.map((g, i) => ({
      index: g.index ?? i,
      slot: inventory.slots?.[i] ?? `index:${g.index ?? i}`,
      gpu: { ...g, problems: [] },
      memoryUsedMb: Number(g.memoryUsedMb ?? 0),
      present: true,
    }));
    this.#initial = this.#newOccurrences(
      inventory.problems,
      this.#gpus.map((t) => t),
    );
  }

  /** The problems discovery found that were not reported before (by this agent or an earlier run). */
  initialProblems(): GpuProblemInit[] {
    return this.#initial;
  }

  /** The GPUs to register: those present, on their registered indices, with the memory last sampled. */
  present(): { gpu: GpuInit; memoryUsedMb: number }[] {
    return this.#gpus.filter((t) => t.present).map((t) => ({ gpu: t.gpu, memoryUsedMb: t.memoryUsedMb }));
  }

  /** Each present GPU's registered index and the memory last sampled, in order (no list is made: every sample asks). */
  forEachPresent(fn: (index: number, memoryUsedMb: number) => void): void {
    for (const t of this.#gpus) if (t.present) fn(t.index, t.memoryUsedMb);
  }

  has(index: number): boolean {
    return this.#gpus.some((t) => t.present && t.index === index);
  }

  uuidOf(index: number): string {
    return String(this.#gpus.find((t) => t.index === index)?.gpu.uuid ?? "");
  }

  /** A sample read: what changed, and the problems not reported before. */
  observe(sample: GpuSample): SampleOutcome {
    this.#failures = 0;
    const changes: GpuChange[] = [];
    let listed: TrackedGpu[];
    if (sample.gpus === undefined) listed = this.#gpus.filter((t) => t.present);
    else {
      listed = sample.gpus.map((seen) => this.#place(seen, changes));
      const here = new Set(listed);
      for (const t of this.#gpus)
        if (t.present && !here.has(t)) {
          t.present = false;
          changes.push({ index: t.index, uuid: String(t.gpu.uuid ?? ""), kind: "gone" });
        }
    }
    listed.forEach((t, p) => {
      const mb = sample.memoryUsedMb[p];
      if (mb !== undefined) t.memoryUsedMb = mb;
    });
    return { changes, problems: this.#newOccurrences(sample.problems, listed) };
  }

  /**
   * A sample that failed. Returns the node problem to report when this
   * failure makes `failureThreshold` in a row (once per run of failures).
   */
  failed(reason: string): string | undefined {
    this.#failures++;
    if (this.#failures !== this.#o.failureThreshold) return undefined;
    return `nvidia-smi failed ${this.#failures} times in a row (GPU figures are stale): ${reason}`;
  }

  #place(seen: GpuSeen, changes: GpuChange[]): TrackedGpu {
    const t = this.#gpus.find((x) => x.slot === seen.slot);
    if (!t) {
      const index = this.#gpus.reduce((m, x) => Math.max(m, x.index + 1), 0);
      const added: TrackedGpu = {
        index,
        slot: seen.slot,
        gpu: gpuInit(index, seen),
        memoryUsedMb: 0,
        present: true,
      };
      this.#gpus.push(added);
      changes.push({ index, uuid: seen.uuid, kind: "new" });
      return added;
    }
    if (t.gpu.uuid !== seen.uuid) {
      const previousUuid = String(t.gpu.uuid ?? "");
      t.gpu = gpuInit(t.index, seen);
      t.present = true;
      changes.push({ index: t.index, uuid: seen.uuid, kind: "swapped", previousUuid });
    } else if (!t.present) {
      t.present = true;
      changes.push({ index: t.index, uuid: seen.uuid, kind: "back" });
    }
    return t;
  }

  /** `problems` (on positions in `listed`) that are new occurrences; the ledger updated and saved. */
  #newOccurrences(problems: readonly SampledProblem[], listed: readonly TrackedGpu[]): GpuProblemInit[] {
    // Nothing shown and no condition remembered: nothing is new and nothing is over (most samples).
    if (problems.length === 0 && this.#levels.size === 0) return [];
    const out: GpuProblemInit[] = [];
    let dirty = false;
    const conditions = new Set<string>();
    for (const p of problems) {
      const t = listed[p.gpuIndex];
      if (!t) continue;
      const key = `${String(t.gpu.uuid ?? "")} ${p.occurrence.signal}`;
      let fresh: boolean;
      if (p.occurrence.type === "event") {
        fresh = !this.#eventSet.has(key);
        if (fresh) {
          this.#events.push(key);
          this.#eventSet.add(key);
          if (this.#events.length > MAX_EVENTS) this.#eventSet.delete(this.#events.shift()!);
        }
      } else {
        conditions.add(key);
        const before = this.#levels.get(key) ?? 0;
        fresh = p.occurrence.level > before;
        if (before !== p.occurrence.level) this.#levels.set(key, p.occurrence.level);
      }
      dirty ||= fresh;
      if (fresh) out.push({ gpuIndex: t.index, kind: p.kind, message: p.message });
    }
    // A condition a listed GPU no longer shows is over: when it comes back, it is a new occurrence.
    const uuids = new Set(listed.map((t) => String(t.gpu.uuid ?? "")));
    for (const key of [...this.#levels.keys()]) {
      if (conditions.has(key) || !uuids.has(key.slice(0, key.indexOf(" ")))) continue;
      this.#levels.delete(key);
      dirty = true;
    }
    if (dirty) this.#o.store?.save({ levels: Object.fromEntries(this.#levels), events: [...this.#events] });
    return out;
  }
}

function gpuInit(index: number, seen: GpuSeen): GpuInit {
  return {
    index,
    uuid: seen.uuid,
    product: seen.product,
    memoryTotalMb: BigInt(seen.memoryTotalMb),
    memoryUsedMb: 0n,
    problems: [],
  };
}
