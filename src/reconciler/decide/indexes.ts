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

/** Nodes with a GPU that has a problem: GPU-fault moves. */
export const gpuTroubleNode: GroupKey<NodeState> = function gpuTroubleNode(n) {
  return n.gpus.some((g) => g.faults.length > 0 || g.problems.length > 0) ? "" : null;
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
  return [
    r.model,
    r.profile,
    r.revision,
    r.phase,
    r.replacedBy === "" ? "" : "r",
    String(held),
    faulted ? "f" : "",
    isReady(r) ? "y" : "",
  ].join("\u0000");
};

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
