/**
 * A GPU as the agent registers it: what discovery read of it (nvidia-smi, a
 * file, or the simulator's hardware spec) and the memory in use on it now.
 * It starts with no problems; those found at discovery travel beside it.
 */
import type { GpuInit } from "../node-agent.js";

/** What every GPU source knows of one GPU. */
export interface GpuFound {
  index: number;
  uuid: string;
  product: string;
  memoryTotalMb: number;
}

export function discoveredGpu(gpu: GpuFound, memoryUsedMb: number): GpuInit {
  return {
    index: gpu.index,
    uuid: gpu.uuid,
    product: gpu.product,
    memoryTotalMb: BigInt(gpu.memoryTotalMb),
    memoryUsedMb: BigInt(memoryUsedMb),
    problems: [],
  };
}
