/** Ready replicas per model against those desired (`isReady`: is-ready.ts). */
import { effectiveReplicas } from "./autoscale.js";
import { isReady } from "./is-ready.js";
import type { ReplicasView } from "./state.js";

/** Per model in the catalog (and any model that still has replicas): ready replicas against desired. */
export function readyCounts(state: ReplicasView): Record<string, { ready: number; desired: number }> {
  const out: Record<string, { ready: number; desired: number }> = {};
  for (const m of state.catalog.models) out[m.name] = { ready: 0, desired: effectiveReplicas(state, m) };
  for (const r of state.replicas.values()) {
    const c = out[r.model] ?? { ready: 0, desired: 0 };
    out[r.model] = c;
    if (isReady(r)) c.ready++;
  }
  return out;
}
