/**
 * Simulated GPUs: the node agent's GPU source (`GpuSource`) reading the
 * fleet's hardware spec instead of nvidia-smi. Memory in use is what the
 * simulated engines hold plus, on a node with the `leak` fault, a foreign
 * process that grows by `leakMbPerHeartbeat` every heartbeat interval; the
 * `xid` fault makes one GPU fall off the bus after `xidAfterHeartbeats`
 * samples (one per heartbeat interval), killing the engines on it, and every
 * later sample shows the Xid as a logged event, as the kernel log would. The
 * agent reports it once (its problem ledger), as it does on a real node.
 */

import { discoveredGpu } from "../agent/gpus/discovered-gpu.js";
import type { GpuSample, GpuSource, NodeHardwareInventory, SampledProblem } from "../agent/node-agent.js";
import { GpuProblem_Kind } from "../gen/llmgw/v1/agent_pb.js";
import type { SimConfig } from "./config.js";
import type { NodeFaultPlan } from "./fault-plan.js";
import { xidProblem } from "./faults.js";
import type { NodeHardware } from "./hardware.js";
import type { SimMachineEngines } from "./machine-engines.js";
import type { Rng } from "./rng.js";

export interface SimGpusOptions {
  hardware: NodeHardware;
  config: SimConfig;
  faults: NodeFaultPlan;
  rng: Rng;
  engines: Pick<SimMachineEngines, "forEachLoaded" | "gpuFailed">;
  /** A GPU problem happened (for the fleet's events). */
  onProblem: (problem: string) => void;
  /** Milliseconds since the epoch (Date.now unless a test says otherwise). */
  now?: () => number;
}

export class SimGpus implements GpuSource {
  readonly #o: SimGpusOptions;
  readonly #now: () => number;
  /** Since when the leaking process grows (the machine's boot). */
  #leakSinceMs: number;
  #samples = 0;
  #xid: SampledProblem | undefined;

  constructor(opts: SimGpusOptions) {
    this.#o = opts;
    this.#now = opts.now ?? Date.now;
    this.#leakSinceMs = this.#now();
  }

  /** What discovery finds now: the GPUs with their memory in use, the fabrics, and the Xid if one happened. */
  inventory(): NodeHardwareInventory {
    const used = this.#memoryUsedMb();
    const { gpus, fabrics } = this.#o.hardware;
    return {
      gpus: gpus.map((g) => discoveredGpu(g, used[g.index] ?? 0)),
      fabrics: fabrics.map((f) => ({ ...f, gpuIndices: [...f.gpuIndices] })),
      problems: this.#xid ? [this.#xid] : [],
    };
  }

  async sample(): Promise<GpuSample> {
    const c = this.#o.config;
    if (this.#o.faults.nodeFaults.has("xid") && !this.#xid && this.#samples >= c.xidAfterHeartbeats)
      this.#fireXid();
    this.#samples++;
    return { memoryUsedMb: this.#memoryUsedMb(), problems: this.#xid ? [this.#xid] : [] };
  }

  /** Memory in use per GPU, MiB. */
  memoryUsedMb(): number[] {
    return this.#memoryUsedMb();
  }

  /** The machine restarted: the leaking process is gone (a broken GPU stays broken). */
  reboot(): void {
    this.#leakSinceMs = this.#now();
  }

  #memoryUsedMb(): number[] {
    const c = this.#o.config;
    const leaked = this.#o.faults.nodeFaults.has("leak")
      ? Math.floor((this.#now() - this.#leakSinceMs) / c.heartbeatMs) * c.leakMbPerHeartbeat
      : 0;
    const gpus = this.#o.hardware.gpus;
    // One pass over the engines for every GPU (the agent samples at every
    // heartbeat): each loaded engine holds its KV cache on each of its GPUs.
    const held = new Array<number>(gpus.length).fill(0);
    this.#o.engines.forEachLoaded((indices) => {
      for (let k = 0; k < gpus.length; k++) {
        const g = gpus[k]!;
        if (indices.includes(g.index)) held[k] = held[k]! + Math.round(g.memoryTotalMb * c.kvCacheFraction);
      }
    });
    for (let k = 0; k < gpus.length; k++) held[k] = Math.min(gpus[k]!.memoryTotalMb, leaked + held[k]!);
    return held;
  }

  #fireXid(): void {
    const gpus = this.#o.hardware.gpus;
    const named = this.#o.config.xidGpu;
    const gpu =
      named === undefined
        ? gpus[Math.floor(this.#o.rng() * gpus.length)]
        : gpus.find((g) => g.index === named);
    if (!gpu) return;
    const message = xidProblem(gpu.index, gpu.uuid);
    this.#xid = {
      gpuIndex: gpus.indexOf(gpu),
      kind: GpuProblem_Kind.XID,
      message,
      occurrence: { type: "event", signal: `xid 79 ${this.#now()}`, level: 1 },
    };
    this.#o.onProblem(message);
    // The engines on a GPU that fell off the bus die with it.
    this.#o.engines.gpuFailed(gpu.index, message);
  }
}
