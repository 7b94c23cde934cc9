import type { DeepReadonly, ReplicaState } from "../../projections/index.js";
import { countReplicas, replicasWhere } from "./indexes.js";
import { hasLiveReplacement } from "./messages.js";
import type { Pass } from "./pass.js";

/**
 * The replicas that count towards a model's wanted number: not draining,
 * and not already replaced by a live replacement (the slot is counted once,
 * through the replacement). Oldest first.
 */
export function activeReplicas(pass: Pass, model: string): DeepReadonly<ReplicaState>[] {
  return replicasWhere(pass.work, (c) => c.model === model && c.phase !== "draining")
    .filter((r) => r.phase !== "draining" && !hasLiveReplacement(pass, r))
    .sort((a, b) => a.createdSeq - b.createdSeq || (a.replicaId < b.replicaId ? -1 : 1));
}

/** How many replicas `activeReplicas` would list, reading only those that name a replacement. */
export function countActiveReplicas(pass: Pass, model: string): number {
  const plain = countReplicas(pass.work, (c) => c.model === model && c.phase !== "draining" && !c.replaced);
  const replaced = replicasWhere(
    pass.work,
    (c) => c.model === model && c.phase !== "draining" && c.replaced,
  ).filter((r) => !hasLiveReplacement(pass, r)).length;
  return plain + replaced;
}
