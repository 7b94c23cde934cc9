/**
 * The hardware a simulated node registers: its GPUs and the fabrics it is on.
 * Deterministic from the node's position in the fleet, so a restarted node
 * registers exactly the same hardware.
 */
import { createHash } from "node:crypto";

export interface HardwareConfig {
  gpusPerNode: number;
  gpuProduct: string;
  gpuMemoryMb: number;
  /** Nodes per InfiniBand/RoCE pod; 0 = no inter-node fabric. */
  nodesPerFabric: number;
  fabricKind: "infiniband" | "roce";
  /**
   * GPUs per NVLink domain. Equal to the GPUs per node (HGX), smaller (several
   * domains in one node), a multiple of it (a rack-scale domain across nodes,
   * like GB200 NVL72), or 0 (PCIe only).
   */
  nvlinkDomainSize: number;
}

export interface SimGpu {
  index: number;
  uuid: string;
  product: string;
  memoryTotalMb: number;
}

export interface SimFabric {
  name: string;
  kind: string;
  gpuIndices: number[];
}

export interface NodeHardware {
  gpus: SimGpu[];
  fabrics: SimFabric[];
}

/** NVIDIA H100 SXM: 80 GB, as nvidia-smi reports it. */
export const H100 = { product: "NVIDIA H100 80GB HBM3", memoryMb: 81559 } as const;

/** `position` is the node's 0-based place in the fleet. */
export function nodeHardware(nodeId: string, position: number, hw: HardwareConfig): NodeHardware {
  const gpus = Array.from({ length: hw.gpusPerNode }, (_, index) => ({
    index,
    uuid: gpuUuid(nodeId, index),
    product: hw.gpuProduct,
    memoryTotalMb: hw.gpuMemoryMb,
  }));
  const all = gpus.map((g) => g.index);
  const fabrics: SimFabric[] = [];
  const size = hw.nvlinkDomainSize;
  if (size > 0 && hw.gpusPerNode > 0) {
    if (size >= hw.gpusPerNode) {
      const nodesPerDomain = Math.floor(size / hw.gpusPerNode);
      const name =
        nodesPerDomain === 1 ? `${nodeId}-nvl` : `nvl-${Math.floor(position / nodesPerDomain) + 1}`;
      fabrics.push({ name, kind: "nvlink", gpuIndices: all });
    } else {
      for (let start = 0, k = 1; start < hw.gpusPerNode; start += size, k++) {
        fabrics.push({
          name: `${nodeId}-nvl-${k}`,
          kind: "nvlink",
          gpuIndices: all.slice(start, start + size),
        });
      }
    }
  }
  if (hw.nodesPerFabric > 0) {
    const prefix = hw.fabricKind === "infiniband" ? "ib-pod" : "roce-pod";
    // Rail-optimized pods: every GPU has its own NIC on the pod's fabric.
    fabrics.push({
      name: `${prefix}-${Math.floor(position / hw.nodesPerFabric) + 1}`,
      kind: hw.fabricKind,
      gpuIndices: all,
    });
  }
  return { gpus, fabrics };
}

/** A stable UUID in the driver's `GPU-xxxxxxxx-xxxx-…` form. */
function gpuUuid(nodeId: string, index: number): string {
  const h = createHash("sha256").update(`${nodeId}/${index}`).digest("hex");
  return `GPU-${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}
