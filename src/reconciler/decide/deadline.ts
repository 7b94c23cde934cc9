/**
 * The earliest future time at which a pass would decide something new on
 * the state this pass leaves behind: a node turning suspect or lost, a
 * command's deadline, a shard's start or ready deadline, a backoff or
 * cooldown ending for a pending replica, a drain deadline, a rolling
 * model's progress deadline, an autoscale cooldown ending or a load
 * reading's stabilization window filled. The runner sleeps until then (or
 * until new events).
 */
import type { DeepReadonly, FleetView, NodeState } from "../../projections/index.js";
import type { ReconcilerConfig } from "./config.js";
import { autoscaleOf } from "./desired.js";
import { nodeIds, replicasWhere, sessionlessNode } from "./indexes.js";
import { limitsFor, replicaProfile } from "./limits.js";

export function nextDeadline(state: FleetView, config: ReconcilerConfig, nowMs: number): number | null {
  let next = Number.POSITIVE_INFINITY;
  const consider = (t: number) => {
    if (t > nowMs && t < next) next = t;
  };
  for (const id of nodeIds(state, sessionlessNode)) {
    const n = state.inventory.nodes.get(id) as DeepReadonly<NodeState>;
    if (n.session !== null || n.disconnectedSinceMs === null) continue;
    if (n.liveness === "disconnected") consider(n.disconnectedSinceMs + config.suspectAfterMs);
    if (n.liveness !== "lost") consider(n.disconnectedSinceMs + config.lostAfterMs);
  }
  for (const c of Object.values(state.replicas.commands)) {
    if (state.inventory.nodes.get(c.nodeId)?.session?.sessionId === c.sessionId) consider(c.deadlineMs);
  }
  // A rolling model's new replicas: the progress deadline may stall the rollout.
  const rolling = new Map(
    state.replicas.catalog.models
      .filter((m) => state.replicas.rollouts[m.name]?.active === true)
      .map((m) => [m.name, m.rollout.progressDeadlineMs]),
  );
  const pendingModels = new Set<string>();
  const models = state.replicas.catalog.models;
  // A running replica has no deadline here: only the others are read.
  for (const r of replicasWhere(state, (c) => c.phase !== "running")) {
    const progress = rolling.get(r.model);
    if (progress !== undefined && r.phase !== "running" && r.phase !== "draining")
      consider(r.createdMs + progress);
    if (r.phase === "placed") {
      for (const s of r.shards) {
        if (s.desired !== "running" || s.fault !== null) continue;
        if (s.state === "pending" && s.startDueMs > 0) consider(s.startDueMs);
        // The profile's limits are looked up only here: a pass placing thousands has none starting yet.
        if (s.state === "starting" && s.startingSinceMs > 0)
          consider(s.startingSinceMs + limitsFor(config, replicaProfile(models, r)).readyTimeoutMs);
      }
    }
    if (r.phase === "pending") {
      pendingModels.add(r.model);
      consider(r.backoffUntilMs);
    } else if (r.phase === "draining") consider(r.drainStartedMs + config.drainDeadlineMs);
  }
  for (const c of Object.values(state.replicas.cooldowns))
    if (pendingModels.has(c.model)) consider(c.untilMs);
  const autoscaled = new Map<string, number>();
  for (const m of state.replicas.catalog.models) {
    const spec = autoscaleOf(config, m);
    if (!spec) continue;
    autoscaled.set(m.name, spec.stabilizationMs);
    const a = state.replicas.autoscale[m.name];
    if (!a) continue;
    const since = Math.max(a.lastUpMs, a.lastDownMs);
    consider(since + spec.upCooldownMs);
    consider(since + spec.downCooldownMs);
  }
  // A load reading covers the stabilization window that long after it was made (a steady load writes no more events).
  for (const r of autoscaled.size === 0 ? [] : replicasWhere(state, (c) => autoscaled.has(c.model))) {
    const window = autoscaled.get(r.model);
    if (window === undefined) continue;
    for (const s of r.shards) {
      const newest = s.load?.samples.at(-1);
      if (newest) consider(newest.atMs + window);
    }
  }
  return Number.isFinite(next) ? next : null;
}
