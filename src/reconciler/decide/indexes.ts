/**
 * The indexes the rules read instead of every node and replica
 * (declared with the tables in projections/fleet-indexes.ts, kept across
 * events and passes by projections/record-table.ts). A
 * rule takes its candidates from an index, in id order, then checks each
 * as it always did: an index only leaves out records the rule would skip.
 * Each key reads only its record.
 */

import type { DeepReadonly } from "../../projections/index.js";
import {
  type FleetView,
  type Group,
  type GroupIndex,
  type NodeState,
  type ReplicaPhase,
  type ReplicaState,
  replicaClass,
} from "../../projections/index.js";

export { drainingNode, gpuTroubleNode, sessionlessNode, unadoptedNode } from "../../projections/index.js";

/** Sorted ids of the nodes in group "" of `index`. */
export function nodeIds(state: FleetView, index: GroupIndex<NodeState>): readonly string[] {
  return state.inventory.nodes.groupIds(index, "");
}

/** What the rules ask of a replica, all from the replica itself: its group in `replicaClass`. */
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
export function replicaGroups(state: FleetView): Array<[ReplicaClass, Group]> {
  const out: Array<[ReplicaClass, Group]> = [];
  for (const [key, g] of state.replicas.replicas.groups(replicaClass)) out.push([classOf(key), g]);
  return out;
}

/** Sorted ids of the replicas whose class passes `where`. */
export function replicaIds(state: FleetView, where: (c: ReplicaClass) => boolean): string[] {
  const parts: (readonly string[])[] = [];
  for (const [c, g] of replicaGroups(state)) if (g.size > 0 && where(c)) parts.push(g.ids());
  if (parts.length === 0) return [];
  if (parts.length === 1) return [...(parts[0] as readonly string[])];
  return parts.flat().sort();
}

/** The replicas whose class passes `where`, in id order. */
export function replicasWhere(
  state: FleetView,
  where: (c: ReplicaClass) => boolean,
): DeepReadonly<ReplicaState>[] {
  const replicas = state.replicas.replicas;
  return replicaIds(state, where).map((id) => replicas.get(id) as DeepReadonly<ReplicaState>);
}

/** How many replicas' classes pass `where` (no record is read). */
export function countReplicas(state: FleetView, where: (c: ReplicaClass) => boolean): number {
  let n = 0;
  for (const [c, g] of replicaGroups(state)) if (where(c)) n += g.size;
  return n;
}
