/**
 * What a StartShard tells the agent about how to launch, beyond the GPUs:
 * the engine, and for a multi-node replica where the ranks meet. One
 * function for the first start and every re-send, so they never differ.
 */
import type { InventoryState, ProfileSpec } from "../../projections/index.js";

/**
 * The rendezvous port of a multi-node replica, from its id alone: a rank > 0
 * must know it before rank 0 has reported anything, and a re-sent start must
 * carry the same. FNV-1a (32 bits) of the id into 29500–30499.
 */
export function rendezvousPort(replicaId: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < replicaId.length; i++) {
    h ^= replicaId.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return 29500 + (h % 1000);
}

export function launchFields(
  inventory: InventoryState,
  profile: ProfileSpec,
  replicaId: string,
  /** Node ids of the ranks, in rank order. */
  rankNodes: readonly string[],
): { engine: string; masterAddr: string; masterPort: number } {
  const engine = profile.engine === "" ? "default" : profile.engine;
  if (rankNodes.length <= 1) return { engine, masterAddr: "", masterPort: 0 };
  const rank0 = rankNodes[0]!;
  const advertised = inventory.nodes[rank0]?.advertiseAddress ?? "";
  return {
    engine,
    masterAddr: advertised === "" ? rank0 : advertised,
    masterPort: rendezvousPort(replicaId),
  };
}
