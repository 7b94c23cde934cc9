/**
 * The routing table: per model, where its ready replicas serve. Pure: a
 * function of the projected state. The reconciler publishes changes of it
 * as EndpointsChanged decisions (so the log says when a replica entered or
 * left the table) and the leader mirrors it into the endpoints KV bucket.
 * Only ready replicas are listed (`isReady`: every shard running, none asked
 * to stop or drain), so a router hears of a drain before its shards do.
 */
import type { DeepReadonly } from "./deep-readonly.js";
import { isReady } from "./is-ready.js";
import type { EndpointEntry, FleetView, ReplicaState } from "./state.js";

/** Where a replica serves: rank 0's endpoint (the others of a multi-node replica are not routed to). */
export function replicaEndpoint(r: DeepReadonly<ReplicaState>): EndpointEntry | null {
  const head = r.shards.find((s) => s.rank === 0) ?? r.shards[0];
  if (!head || head.endpoint === "") return null;
  return { replicaId: r.replicaId, url: head.endpoint, nodeId: head.nodeId };
}

/**
 * Per model (models in name order), its ready replicas with a known
 * endpoint, sorted by replica id. A model with none is absent.
 */
export function routingTable(state: FleetView): Record<string, EndpointEntry[]> {
  const byModel = new Map<string, EndpointEntry[]>();
  const replicas = state.replicas.replicas;
  // In replica-id order (the keys are the ids), so each model's list comes out sorted.
  for (const r of replicas.sortedValues()) {
    if (!isReady(r)) continue;
    const e = replicaEndpoint(r);
    if (!e) continue;
    const list = byModel.get(r.model) ?? [];
    list.push(e);
    byModel.set(r.model, list);
  }
  const out: Record<string, EndpointEntry[]> = {};
  for (const model of [...byModel.keys()].sort()) out[model] = byModel.get(model) as EndpointEntry[];
  return out;
}
