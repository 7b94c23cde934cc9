/**
 * What a StartShard tells an agent about its shard, built in one place: the
 * first start (placing.ts) and every re-send (start-deadlines.ts) must say
 * the same, or an agent that did start the first would be asked for
 * something else under the same command id.
 */
import { create } from "@bufbuild/protobuf";
import { type StartShard, StartShardSchema } from "../../gen/llmgw/v1/agent_pb.js";
import { DEFAULT_ENGINE, fnv1a32, type InventoryView, type ProfileSpec } from "../../projections/index.js";

/** One shard of a replica as placed. */
export interface PlacedShard {
  shardId: string;
  nodeId: string;
  rank: number;
  gpuIndices: readonly number[];
}

/** The lowest rendezvous port; ports span [BASE, BASE + SPAN). 29500 is the PyTorch default. */
export const RENDEZVOUS_PORT_BASE = 29500;
export const RENDEZVOUS_PORT_SPAN = 1000;

/**
 * The rendezvous port of a multi-node replica: derived from its id alone
 * (29500 + FNV-1a 32-bit of the id, mod 1000). It is not chosen by rank 0:
 * the ranks > 0 start at the same time and must know it before rank 0
 * reports anything, and a start sent again must carry the same port as the
 * first. Different replicas on one node mostly get different ports; the
 * agent reports a clash as a failed start, and the replacement's new id
 * gives another port.
 */
export function rendezvousPort(replicaId: string): number {
  return RENDEZVOUS_PORT_BASE + (fnv1a32(replicaId) % RENDEZVOUS_PORT_SPAN);
}

/**
 * The StartShard for `shard`, one of `shards` (every shard of the replica,
 * any order), under `commandId` (each send names its own, or repeats the
 * first's). For a multi-node replica the ranks rendezvous at rank 0's node:
 * its advertised address, or its node id when it advertised none (older
 * agents).
 */
export function startShard(
  commandId: string,
  replica: { replicaId: string; model: string },
  profile: ProfileSpec,
  shards: readonly PlacedShard[],
  shard: PlacedShard,
  inventory: InventoryView,
): StartShard {
  const worldSize = Math.max(1, shards.length);
  const multiNode = worldSize > 1;
  // Ranks in order only for a multi-node replica (a copy sorted per shard started).
  const ranked = multiNode ? [...shards].sort((a, b) => a.rank - b.rank) : shards;
  const master = ranked[0];
  const masterAddr =
    multiNode && master ? inventory.nodes.get(master.nodeId)?.advertiseAddress || master.nodeId : "";
  return create(StartShardSchema, {
    commandId,
    shardId: shard.shardId,
    replicaId: replica.replicaId,
    model: replica.model,
    profile: profile.name,
    gpuIndices: [...shard.gpuIndices],
    engine: profile.engine || DEFAULT_ENGINE,
    engineArgs: [...profile.engineArgs],
    engineEnv: { ...profile.engineEnv },
    rank: shard.rank,
    worldSize,
    peers: multiNode ? ranked.map((s) => s.nodeId) : [],
    masterAddr,
    masterPort: multiNode ? rendezvousPort(replica.replicaId) : 0,
  });
}
