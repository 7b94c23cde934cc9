/**
 * Two-stage expiry. A node without a session is suspect after suspectAfter
 * (no new work, its replicas kept: it may come back) and lost after
 * lostAfter: its shards count as gone and their replicas are placed again.
 * A lost node's replicas are failed on every pass until none is left there,
 * so a truncated pass catches up.
 */
import { Liveness } from "../../gen/llmgw/v1/events_pb.js";
import type { DeepReadonly, NodeState } from "../../projections/index.js";
import { nodeIds, sessionlessNode } from "./indexes.js";
import { decision, failReplica } from "./messages.js";
import type { Pass } from "./pass.js";

export function expireNodes(pass: Pass): void {
  const { suspectAfterMs, lostAfterMs } = pass.config;
  for (const id of nodeIds(pass.work, sessionlessNode)) {
    const n = pass.work.inventory.nodes.get(id) as DeepReadonly<NodeState>;
    if (n.session !== null || n.disconnectedSinceMs === null) continue;
    const away = pass.nowMs - n.disconnectedSinceMs;
    let next: Liveness | undefined;
    if (away >= lostAfterMs && n.liveness !== "lost") next = Liveness.LOST;
    else if (away >= suspectAfterMs && n.liveness === "disconnected") next = Liveness.SUSPECT;
    if (next !== undefined) {
      const what =
        next === Liveness.LOST
          ? "lost: its shards count as gone and their replicas will be placed again"
          : "suspect: no new work, its replicas are kept";
      const ok = pass.add({
        decisions: [
          decision(
            `${n.nodeId} without a session for ${seconds(away)} (${n.lastCloseReason || "closed"}): ${what}`,
            {
              case: "nodeLiveness",
              value: {
                nodeId: n.nodeId,
                liveness: next,
                sessionId: n.lastSessionId,
                disconnectedSinceUnixMs: BigInt(n.disconnectedSinceMs),
              },
            },
          ),
        ],
        commands: [],
      });
      if (!ok) return;
    }
    if (n.liveness === "lost") failReplicasOn(pass, n);
  }
}

function failReplicasOn(pass: Pass, n: DeepReadonly<NodeState>): void {
  for (const r of pass.work.replicas.replicas.sortedValues()) {
    // A draining replica is finishing anyway: its drain counts shards on unreachable nodes as done.
    if (r.phase === "draining") continue;
    const shard = r.shards.find((s) => s.nodeId === n.nodeId && s.desired !== "stopped");
    if (!shard) continue;
    if (!pass.add(failReplica(pass, r, shard.shardId, n.nodeId, `node ${n.nodeId} is lost`))) return;
  }
}

function seconds(ms: number): string {
  return `${Math.round(ms / 1000)}s`;
}
