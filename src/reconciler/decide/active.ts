import type { ReplicaState } from "../../projections/index.js";
import { hasLiveReplacement, sortedValues } from "./messages.js";
import type { Pass } from "./pass.js";

/**
 * The replicas that count towards a model's wanted number: not draining,
 * and not already replaced by a live replacement (the slot is counted once,
 * through the replacement). Oldest first.
 */
export function activeReplicas(pass: Pass, model: string): ReplicaState[] {
  return sortedValues(pass.work.replicas.replicas)
    .filter((r) => r.model === model && r.phase !== "draining" && !hasLiveReplacement(pass, r))
    .sort((a, b) => a.createdSeq - b.createdSeq || (a.replicaId < b.replicaId ? -1 : 1));
}
