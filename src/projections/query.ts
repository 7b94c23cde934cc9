/**
 * Read-only questions about a fleet state, shared by replay, the API and
 * the UI. Pure: they never change the state they are given.
 */
import type { DeepReadonly } from "./deep-readonly.js";
import { cloneFleet } from "./fleet.js";
import { RecordTable } from "./record-table.js";
import type { FleetState, FleetView, ReplicaState, ShardState } from "./state.js";

/** A replica's shard that runs (or is placed) on a GPU. */
export interface GpuShard {
  replicaId: string;
  model: string;
  shard: DeepReadonly<ShardState>;
}

/**
 * Which replica shards sit on each GPU of a node, by GPU index. Shards
 * whose desired state is "stopped" still hold their GPUs until they report
 * stopped, so they are listed too.
 */
export function shardsByGpu(state: FleetView, nodeId: string): Map<number, GpuShard[]> {
  const out = new Map<number, GpuShard[]>();
  for (const r of state.replicas.replicas.sortedValues()) {
    for (const s of r.shards) {
      if (s.nodeId !== nodeId || s.state === "stopped") continue;
      for (const g of s.gpuIndices) {
        const list = out.get(g) ?? [];
        list.push({ replicaId: r.replicaId, model: r.model, shard: s });
        out.set(g, list);
      }
    }
  }
  return out;
}

export interface FleetFilter {
  /** Only this node and the replicas with a shard on it. */
  nodeId?: string;
  /** Only this replica and the nodes its shards are on. */
  replicaId?: string;
}

/**
 * A copy of the state narrowed to a node and/or a replica. The catalog,
 * gateways and pass bookkeeping are kept whole; nodes, replicas, commands,
 * failures and cooldowns are narrowed.
 */
export function filterFleet(state: FleetView, filter: FleetFilter): FleetState {
  const out = cloneFleet(state);
  if (filter.nodeId === undefined && filter.replicaId === undefined) return out;
  const keepReplica = (r: ReplicaState) =>
    (filter.replicaId === undefined || r.replicaId === filter.replicaId) &&
    (filter.nodeId === undefined || r.shards.some((s) => s.nodeId === filter.nodeId));
  const replicas = out.replicas.replicas.values().filter(keepReplica);
  const replicaIds = new Set(replicas.map((r) => r.replicaId));
  const nodeIds = new Set<string>();
  if (filter.nodeId !== undefined) nodeIds.add(filter.nodeId);
  else for (const r of replicas) for (const s of r.shards) nodeIds.add(s.nodeId);

  out.inventory = { ...out.inventory, nodes: narrowed(out.inventory.nodes, (id) => nodeIds.has(id)) };
  out.replicas = { ...out.replicas, replicas: narrowed(out.replicas.replicas, (id) => replicaIds.has(id)) };
  out.replicas.commands = pick(
    out.replicas.commands,
    (_, c) =>
      (filter.replicaId === undefined || c.replicaId === filter.replicaId) &&
      (filter.nodeId === undefined || c.nodeId === filter.nodeId),
  );
  const models = new Set(replicas.map((r) => r.model));
  const keepPair = (p: { model: string; nodeId: string }) =>
    nodeIds.has(p.nodeId) && (filter.replicaId === undefined || models.has(p.model));
  out.replicas.cooldowns = pick(out.replicas.cooldowns, (_, c) => keepPair(c));
  out.replicas.failures = pick(out.replicas.failures, (key) => {
    const at = key.lastIndexOf("@");
    return keepPair({ model: key.slice(0, at), nodeId: key.slice(at + 1) });
  });
  return out;
}

/** A table of the records of `table` whose id `keep` keeps, in its order, with its indexes. */
function narrowed<T extends object>(table: RecordTable<T>, keep: (id: string) => boolean): RecordTable<T> {
  const out = new RecordTable<T>(table.indexes);
  // The records are the copy's own (cloneFleet): the new table may own them.
  for (const id of table.keys()) if (keep(id)) out.put(id, table.get(id) as T);
  return out;
}

function pick<T>(rec: Record<string, T>, keep: (key: string, value: T) => boolean): Record<string, T> {
  const out: Record<string, T> = {};
  for (const [k, v] of Object.entries(rec)) if (keep(k, v)) out[k] = v;
  return out;
}
