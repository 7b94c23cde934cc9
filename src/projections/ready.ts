/**
 * Ready: the only replicas that count as capacity. A replica is ready when
 * it is placed, every one of its shards reports RUNNING, and none is being
 * drained or stopped. A placed replica whose engines are still loading, or
 * whose start was never acknowledged, is not.
 */
import { effectiveReplicas } from "./autoscale.js";
import { recordValues } from "./sorted-keys.js";
import type { ReplicaState, ReplicasState } from "./state.js";

export function isReady(r: ReplicaState): boolean {
  return (
    r.phase === "running" &&
    r.shards.length > 0 &&
    r.shards.every((s) => s.state === "running" && s.desired === "running")
  );
}

/** Per model in the catalog (and any model that still has replicas): ready replicas against desired. */
export function readyCounts(state: ReplicasState): Record<string, { ready: number; desired: number }> {
  const out: Record<string, { ready: number; desired: number }> = {};
  for (const m of state.catalog.models) out[m.name] = { ready: 0, desired: effectiveReplicas(state, m) };
  for (const r of recordValues(state.replicas)) {
    const c = out[r.model] ?? { ready: 0, desired: 0 };
    out[r.model] = c;
    if (isReady(r)) c.ready++;
  }
  return out;
}
