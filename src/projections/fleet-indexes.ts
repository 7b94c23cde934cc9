/**
 * The indexes the node and replica tables keep, declared with the tables
 * (record-table.ts): the groups a reconcile pass's rules take their
 * candidates from instead of reading every record, and the shard owners
 * the replicas fold looks up for every stop, drain and load report. Each
 * key reads only its record.
 */
import { isReady } from "./is-ready.js";
import type { GroupIndex, LookupIndex, TableIndexes } from "./record-table.js";
import type { NodeState, ReplicaPhase, ReplicaState } from "./state.js";

/** Nodes without a session (group ""): liveness and its deadlines. */
export const sessionlessNode: GroupIndex<NodeState> = {
  name: "sessionlessNode",
  keyOf: (n) => (n.session === null ? "" : null),
};

/** Nodes with a session whose registration no pass has handled yet (group ""): adoption. */
export const unadoptedNode: GroupIndex<NodeState> = {
  name: "unadoptedNode",
  keyOf: (n) => (n.session !== null && n.session.adoptionSeq === 0 ? "" : null),
};

/**
 * Nodes with a GPU that has a problem, or a GPU missing from their
 * registration (a gap in the indices, GPUs being listed from 0 in order):
 * GPU-fault moves.
 */
export const gpuTroubleNode: GroupIndex<NodeState> = {
  name: "gpuTroubleNode",
  keyOf: (n) =>
    n.gpus.some((g, i) => g.faults.length > 0 || g.problems.length > 0 || g.index !== i) ? "" : null,
};

/** Nodes an operator drains (group ""). */
export const drainingNode: GroupIndex<NodeState> = {
  name: "drainingNode",
  keyOf: (n) => (n.draining ? "" : null),
};

export const NODE_INDEXES: TableIndexes<NodeState> = {
  groups: [sessionlessNode, unadoptedNode, gpuTroubleNode, drainingNode],
};

/**
 * What the rules ask of a replica, all from the replica itself, as one
 * group key: model, profile, revision, phase, shards not asked to stop,
 * whether it names a replacement, has a faulted shard wanted running, is
 * ready (reconciler/decide/indexes.ts reads the parts back).
 */
export const replicaClass: GroupIndex<ReplicaState> = {
  name: "replicaClass",
  keyOf(r) {
    let held = 0;
    let faulted = false;
    for (const s of r.shards) {
      if (s.desired !== "stopped") held++;
      if (s.fault !== null && s.desired === "running") faulted = true;
    }
    return classKey(r.model, r.profile, r.revision, r.phase, held, r.replacedBy !== "", faulted, isReady(r));
  },
};

/** The key of the shard-owner lookup: a shard on a node. */
export function shardKey(nodeId: string, shardId: string): string {
  return `${nodeId}\u0000${shardId}`;
}

/** Which replica holds a shard on a node (the first in the records' order, should two name it). */
export const shardOwners: LookupIndex<ReplicaState> = {
  name: "shardOwners",
  keysOf: (r) => r.shards.map((s) => shardKey(s.nodeId, s.shardId)),
};

export const REPLICA_INDEXES: TableIndexes<ReplicaState> = {
  groups: [replicaClass],
  lookups: [shardOwners],
};

/**
 * Class keys already made, by their parts: the index reads a replica's key
 * each time the fold changes it (twice per replica in a full placement),
 * and a new joined string each time came to about 5 MB at 10,000 replicas.
 * Few keys exist (models × profiles × revisions × phases × shard counts).
 */
const keys = new Map<string, Map<string, Map<string, Map<string, Map<number, string>>>>>();

function classKey(
  model: string,
  profile: string,
  revision: string,
  phase: ReplicaPhase,
  held: number,
  replaced: boolean,
  faulted: boolean,
  ready: boolean,
): string {
  const byRest = inner(inner(inner(inner(keys, model), profile), revision), phase);
  const rest = held * 8 + (replaced ? 4 : 0) + (faulted ? 2 : 0) + (ready ? 1 : 0);
  let key = byRest.get(rest);
  if (key === undefined) {
    key = [
      model,
      profile,
      revision,
      phase,
      replaced ? "r" : "",
      String(held),
      faulted ? "f" : "",
      ready ? "y" : "",
    ].join("\u0000");
    byRest.set(rest, key);
  }
  return key;
}

/** The map `m` holds under `k`, added empty if it has none. */
function inner<K, K2, V>(m: Map<K, Map<K2, V>>, k: K): Map<K2, V> {
  let v = m.get(k);
  if (v === undefined) {
    v = new Map();
    m.set(k, v);
  }
  return v;
}
