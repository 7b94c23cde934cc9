/**
 * GPU faults. A replica with a shard on a GPU that has a problem (reported
 * by a heartbeat or in the registration) is moved off make-before-break,
 * exactly like a replica on a draining node: a replacement is placed on
 * healthy GPUs, and once it runs the replica drains (or earlier, as the
 * model's disruption budget allows: drains.ts). A cordoned GPU only
 * keeps new work off (placement), like a cordoned node: nothing moves.
 * Node-level problems (not tied to a GPU) also only keep new work off.
 * A shard on a GPU the node's registration no longer lists (it fell off the
 * bus, or was taken out) is on a faulty GPU too: its replica is placed
 * elsewhere. Such nodes are found by the gap their GPU indices leave; a
 * node that lost its last GPU is found by the shard's own failure, which
 * the agent reports with the registration.
 */
import type {
  DeepReadonly,
  NodeState,
  ReplicaState,
  ShardState,
  TableView,
} from "../../projections/index.js";
import { replaceThenDrain } from "./drains.js";
import { gpuTroubleNode, nodeIds } from "./indexes.js";
import { finished } from "./messages.js";
import type { Pass } from "./pass.js";

export function moveOffFaultyGpus(pass: Pass): void {
  // Passes do not change GPU health, so the nodes with a faulty GPU are known
  // up front; on a healthy fleet the replicas are not even looked at.
  const faulty = new Set(nodeIds(pass.work, gpuTroubleNode));
  if (faulty.size === 0) return;
  const models = new Set(pass.work.replicas.catalog.models.map((m) => m.name));
  for (const r of pass.work.replicas.replicas.sortedValues()) {
    if (r.phase === "draining" || !r.shards.some((s) => faulty.has(s.nodeId))) continue;
    const fault = faultOf(pass.work.inventory.nodes, r);
    if (fault === undefined) continue;
    const unit = replaceThenDrain(pass, r, models, fault.why, fault.nodeId);
    if (unit && !pass.add(unit)) return;
  }
}

/** Why the replica must move, and where: its first running shard on a faulty GPU, or undefined. */
function faultOf(
  nodes: TableView<NodeState>,
  r: DeepReadonly<ReplicaState>,
): { why: string; nodeId: string } | undefined {
  for (const s of r.shards) {
    if (s.desired !== "running" || finished(s)) continue;
    const why = faultyGpu(nodes.get(s.nodeId), s);
    if (why !== undefined) return { why, nodeId: s.nodeId };
  }
  return undefined;
}

function faultyGpu(n: DeepReadonly<NodeState> | undefined, s: DeepReadonly<ShardState>): string | undefined {
  if (!n) return undefined;
  for (const i of s.gpuIndices) {
    const g = n.gpus.find((x) => x.index === i);
    if (!g) return `GPU ${i} of ${n.nodeId} is no longer registered (gone from the node)`;
    const first = g.faults[0];
    if (first) return `GPU ${i} of ${n.nodeId} has a problem (${first.kind}: ${first.message})`;
    const registered = g.problems[0];
    if (registered !== undefined) return `GPU ${i} of ${n.nodeId} has a problem (${registered})`;
  }
  return undefined;
}
