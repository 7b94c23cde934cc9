/**
 * Which replica holds a shard on a node: a lookup the replicas fold makes
 * for every stop and drain command. Scanning every replica for it made the
 * fold's cost grow with the fleet (at 1,000 nodes most of a replay went
 * there), so the owners are indexed.
 *
 * The index is derived data, not state: it is kept beside the replicas
 * record (keyed by that object) rather than in it, so snapshots and the
 * serialized state do not change, and a state loaded from a snapshot or
 * copied builds its index on first use. Deterministic: it answers exactly
 * what the scan would, including the rare case of two replicas naming the
 * same shard on one node (then it falls back to the scan's order). A
 * reconcile pass's fork shares the replicas and this index with its
 * original, and gives both back when it is released (fork.ts).
 */

import { recordValues } from "./sorted-keys.js";
import type { ReplicaState } from "./state.js";

type Replicas = Record<string, ReplicaState>;
type Index = Map<string, Set<string>>;

const indexes = new WeakMap<Replicas, Index>();

function owners(replicas: Replicas, k: string): string[] {
  return [...((indexes.get(replicas) ?? build(replicas)).get(k) ?? [])];
}

function key(nodeId: string, shardId: string): string {
  return `${nodeId}\u0000${shardId}`;
}

function build(replicas: Replicas): Index {
  const index: Index = new Map();
  for (const r of recordValues(replicas)) add(index, r);
  indexes.set(replicas, index);
  return index;
}

function add(index: Index, r: ReplicaState): void {
  for (const s of r.shards) {
    const k = key(s.nodeId, s.shardId);
    let owners = index.get(k);
    if (!owners) {
      owners = new Set();
      index.set(k, owners);
    }
    owners.add(r.replicaId);
  }
}

/** The replica holding `shardId` on `nodeId`, or "" — the first in the record's order. */
export function shardOwner(replicas: Replicas, nodeId: string, shardId: string): string {
  const found = owners(replicas, key(nodeId, shardId));
  if (found.length === 0) return "";
  if (found.length === 1) return found[0] ?? "";
  for (const r of recordValues(replicas)) {
    if (r.shards.some((s) => s.shardId === shardId && s.nodeId === nodeId)) return r.replicaId;
  }
  return "";
}

/** Call before a replica's shards change or it is deleted. */
export function forgetShards(replicas: Replicas, r: ReplicaState): void {
  const index = indexes.get(replicas);
  if (!index) return;
  for (const s of r.shards) {
    const k = key(s.nodeId, s.shardId);
    const owners = index.get(k);
    if (!owners) continue;
    owners.delete(r.replicaId);
    if (owners.size === 0) index.delete(k);
  }
}

/** Call after a replica's shards changed (or it was created with shards). */
export function recordShards(replicas: Replicas, r: ReplicaState): void {
  const index = indexes.get(replicas);
  if (index) add(index, r);
}
