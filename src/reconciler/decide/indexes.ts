/**
 * The indexes the rules read instead of every node and replica
 * (projections/record-index.ts keeps them across events and passes). A
 * rule takes its candidates from an index, in id order, then checks each
 * as it always did: an index only leaves out records the rule would skip.
 * Each key reads only its record.
 */
import {
  type FleetState,
  type Group,
  type GroupKey,
  groupIds,
  groupsOf,
  isReady,
  type NodeState,
  type ReplicaPhase,
  type ReplicaState,
} from "../../projections/index.js";

/** Nodes without a session: liveness and its deadlines. */
export const sessionlessNode: GroupKey<NodeState> = function sessionlessNode(n) {
  return n.session === null ? "" : null;
};

/** Nodes with a session whose registration no pass has handled yet: adoption. */
export const unadoptedNode: GroupKey<NodeState> = function unadoptedNode(n) {
  return n.session !== null && n.session.adoptionSeq === 0 ? "" : null;
};

/**
 * Nodes with a GPU that has a problem, or a GPU missing from their
 * registration (a gap in the indices, GPUs being listed from 0 in order):
 * GPU-fault moves.
 */
export const gpuTroubleNode: GroupKey<NodeState> = function gpuTroubleNode(n) {
  return n.gpus.some((g, i) => g.faults.length > 0 || g.problems.length > 0 || g.index !== i) ? "" : null;
};

/** Nodes an operator drains. */
export const drainingNode: GroupKey<NodeState> = function drainingNode(n) {
  return n.draining ? "" : null;
};

/** Sorted ids of the nodes `key` holds. */
export function nodeIds(state: FleetState, key: GroupKey<NodeState>): readonly string[] {
  return groupIds(state.inventory.nodes, key, "");
}

/** What the rules ask of a replica, all from the replica itself: its group in one index. */
export interface ReplicaClass {
  model: string;
  profile: string;
  revision: string;
  phase: ReplicaPhase;
  /** It names a replacement (which may or may not be live). */
  replaced: boolean;
  /** Shards not asked to stop. */
  held: number;
  /** A shard wanted running has a fault the fold recorded. */
  faulted: boolean;
  ready: boolean;
}

export const replicaClass: GroupKey<ReplicaState> = function replicaClass(r) {
  let held = 0;
  let faulted = false;
  for (const s of r.shards) {
    if (s.desired !== "stopped") held++;
    if (s.fault !== null && s.desired === "running") faulted = true;
  }
  return classKey(r.model, r.profile, r.revision, r.phase, held, r.replacedBy !== "", faulted, isReady(r));
};

/**
 * Class keys already made, by their parts: the index reads a replica's key
 * each time the fold changes it (twice per replica in a full placement),
 * and a new joined string each time would allocate about 5 MB per full
 * placement of 10,000 replicas.
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

const parsed = new Map<string, ReplicaClass>();

function classOf(key: string): ReplicaClass {
  let c = parsed.get(key);
  if (!c) {
    const [model = "", profile = "", revision = "", phase = "", replaced, held, faulted, ready] =
      key.split("\u0000");
    c = {
      model,
      profile,
      revision,
      phase: phase as ReplicaPhase,
      replaced: replaced === "r",
      held: Number(held),
      faulted: faulted === "f",
      ready: ready === "y",
    };
    parsed.set(key, c);
  }
  return c;
}

/** The replicas' groups, each with its class. */
export function replicaGroups(state: FleetState): Array<[ReplicaClass, Group]> {
  const out: Array<[ReplicaClass, Group]> = [];
  for (const [key, g] of groupsOf(state.replicas.replicas, replicaClass)) out.push([classOf(key), g]);
  return out;
}

/** Sorted ids of the replicas whose class passes `where`. */
export function replicaIds(state: FleetState, where: (c: ReplicaClass) => boolean): string[] {
  const parts: (readonly string[])[] = [];
  for (const [c, g] of replicaGroups(state)) if (g.size > 0 && where(c)) parts.push(g.ids());
  if (parts.length === 0) return [];
  if (parts.length === 1) return [...(parts[0] as readonly string[])];
  return parts.flat().sort();
}

/** The replicas whose class passes `where`, in id order. */
export function replicasWhere(state: FleetState, where: (c: ReplicaClass) => boolean): ReplicaState[] {
  const replicas = state.replicas.replicas;
  return replicaIds(state, where).map((id) => replicas[id] as ReplicaState);
}

/** How many replicas' classes pass `where` (no record is read). */
export function countReplicas(state: FleetState, where: (c: ReplicaClass) => boolean): number {
  let n = 0;
  for (const [c, g] of replicaGroups(state)) if (where(c)) n += g.size;
  return n;
}
