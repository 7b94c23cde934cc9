/**
 * What a simulated machine is still running when `llmgw dev` starts again:
 * the shards the log says were placed on it and not stopped. Real machines
 * keep their engines running while the control plane restarts; the
 * simulator persists nothing, so dev hands it this list, and the reconciler
 * then adopts those shards instead of starting them again.
 */
import type { ReplicaState } from "../../projections/index.js";

export interface ResumedShard {
  shardId: string;
  replicaId: string;
  model: string;
  profile: string;
  gpuIndices: number[];
}

export function runningShardsByNode(replicas: ReadonlyArray<ReplicaState>): Record<string, ResumedShard[]> {
  const out: Record<string, ResumedShard[]> = {};
  for (const r of replicas) {
    for (const s of r.shards) {
      if (s.desired === "stopped" || s.state === "stopped" || s.state === "failed" || s.state === "pending")
        continue;
      const list = out[s.nodeId] ?? [];
      list.push({
        shardId: s.shardId,
        replicaId: r.replicaId,
        model: r.model,
        profile: r.profile,
        gpuIndices: [...s.gpuIndices],
      });
      out[s.nodeId] = list;
    }
  }
  return out;
}
