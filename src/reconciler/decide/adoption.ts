/**
 * Adoption: the first thing done with a new session. What the node says it
 * runs is matched against the catalog and the replica state:
 * - a shard of a wanted replica is adopted as running (the replica is known
 *   and this is its slot, or its slot is open, or it is a replica id we do
 *   not know of a model that still needs replicas);
 * - a shard nothing claims is stopped (it holds GPUs nobody routes to);
 * - so is a shard on a GPU the node does not list;
 * - a shard whose slot is already served elsewhere (re-placed while the
 *   node was away) is stopped as a duplicate;
 * - shards the state had on the node from an older session that the node no
 *   longer lists are gone: their replicas fail and are placed again.
 * The ShardsAdopted decision is emitted even with no shard: it marks the
 * session handled, and nothing new is placed on the node before it.
 */

import type { MessageInitShape } from "@bufbuild/protobuf";
import type { AdoptedShardSchema, Command, Decision } from "../../gen/llmgw/v1/events_pb.js";
import type { DeepReadonly, NodeState, RegisteredShard, SessionState } from "../../projections/index.js";
import { activeReplicas } from "./active.js";
import { nodeIds, unadoptedNode } from "./indexes.js";
import { decision, failReplica, stopCommand } from "./messages.js";
import type { Pass } from "./pass.js";

type Adopted = MessageInitShape<typeof AdoptedShardSchema>;

/** Registered states that mean a process holds the GPUs. */
function alive(s: DeepReadonly<RegisteredShard>): boolean {
  return s.state !== "stopped" && s.state !== "failed";
}

export function adoptSessions(pass: Pass): void {
  for (const id of nodeIds(pass.work, unadoptedNode)) {
    const n = pass.work.inventory.nodes.get(id) as DeepReadonly<NodeState>;
    const session = n.session;
    if (session?.adoptionSeq !== 0 || session === null) continue;
    if (!pass.add(adoptNode(pass, n, session))) return;
  }
}

function adoptNode(
  pass: Pass,
  n: DeepReadonly<NodeState>,
  session: DeepReadonly<SessionState>,
): { decisions: Decision[]; commands: Command[] } {
  const catalog = pass.work.replicas.catalog.models;
  const replicas = pass.work.replicas.replicas;
  const adopted: Adopted[] = [];
  const decisions: Decision[] = [];
  const commands: Command[] = [];
  /** New replicas adopted from this registration, per model (they count towards the model's replicas). */
  const newPerModel = new Map<string, number>();
  const newReplicas = new Set<string>();

  const stop = (s: DeepReadonly<RegisteredShard>, d: Decision) => {
    decisions.push(d);
    commands.push(
      stopCommand(pass, {
        nodeId: n.nodeId,
        sessionId: session.sessionId,
        shardId: s.shardId,
        replicaId: s.replicaId,
      }),
    );
  };
  const unclaimed = (s: DeepReadonly<RegisteredShard>, reason: string) =>
    stop(
      s,
      decision(`${s.shardId} on ${n.nodeId} is not claimed (${reason}): stopping it`, {
        case: "shardUnclaimed",
        value: {
          nodeId: n.nodeId,
          sessionId: session.sessionId,
          shardId: s.shardId,
          replicaId: s.replicaId,
          model: s.model,
          reason,
        },
      }),
    );
  const duplicate = (s: DeepReadonly<RegisteredShard>, where: string) =>
    stop(
      s,
      decision(
        `${s.shardId} on ${n.nodeId}: replica ${s.replicaId} is already served ${where}; stopping the duplicate`,
        {
          case: "duplicateStopped",
          value: { nodeId: n.nodeId, shardId: s.shardId, replicaId: s.replicaId },
        },
      ),
    );
  const adopt = (s: DeepReadonly<RegisteredShard>, rank: number) =>
    adopted.push({
      shardId: s.shardId,
      replicaId: s.replicaId,
      model: s.model,
      profile: s.profile,
      gpuIndices: [...s.gpuIndices],
      rank,
    });

  const onNode = new Set(n.gpus.map((g) => g.index));
  for (const s of session.registeredShards.filter(alive)) {
    // A shard on a GPU the node does not list (one that fell off the bus, or
    // a confused agent) cannot be routed to or placed around: never adopted.
    const missing = s.gpuIndices.filter((i) => !onNode.has(i));
    if (missing.length > 0) {
      unclaimed(s, `GPU ${missing.join(", ")} ${missing.length === 1 ? "is" : "are"} not on the node`);
      continue;
    }
    const model = catalog.find((m) => m.name === s.model);
    if (!model) {
      unclaimed(s, `model ${s.model} is not in the catalog`);
      continue;
    }
    const profile = model.profiles.find((p) => p.name === s.profile);
    if (!profile) {
      unclaimed(s, `${s.model} has no profile ${s.profile}`);
      continue;
    }
    const r = replicas.get(s.replicaId);
    if (!r) {
      if (newReplicas.has(s.replicaId)) {
        duplicate(s, `by another shard on ${n.nodeId}`);
        continue;
      }
      const have = activeReplicas(pass, model.name).length + (newPerModel.get(model.name) ?? 0);
      if (have >= model.replicas) {
        unclaimed(s, `${model.name} already has ${have}/${model.replicas} replicas`);
        continue;
      }
      newPerModel.set(model.name, (newPerModel.get(model.name) ?? 0) + 1);
      newReplicas.add(s.replicaId);
      adopt(s, 0);
      continue;
    }
    const own = r.shards.find(
      (x) => x.shardId === s.shardId && x.nodeId === n.nodeId && x.desired !== "stopped",
    );
    if (own) {
      adopt(s, own.rank);
      continue;
    }
    if (r.phase === "draining") {
      unclaimed(s, `replica ${r.replicaId} is draining`);
      continue;
    }
    const held = r.shards.filter((x) => x.desired !== "stopped");
    const fits = (r.profile === "" || r.profile === s.profile) && !held.some((x) => x.nodeId === n.nodeId);
    if (fits && held.length < Math.max(1, profile.shards)) {
      adopt(s, lowestFreeRank(held.map((x) => x.rank)));
      continue;
    }
    duplicate(s, held.length > 0 ? `on ${[...new Set(held.map((x) => x.nodeId))].join(", ")}` : "elsewhere");
  }

  // Shards placed on this node in an earlier session that it no longer runs are gone.
  const listed = new Set(adopted.map((a) => a.shardId));
  const gone: Array<{ replicaId: string; shardId: string }> = [];
  for (const r of replicas.sortedValues()) {
    if (r.phase === "draining") continue;
    const s = r.shards.find(
      (x) =>
        x.nodeId === n.nodeId &&
        x.sessionId !== session.sessionId &&
        x.desired !== "stopped" &&
        !listed.has(x.shardId),
    );
    if (s) gone.push({ replicaId: r.replicaId, shardId: s.shardId });
  }

  const summary =
    adopted.length === 0
      ? `${n.nodeId} registered (session ${session.sessionId}) running nothing we keep`
      : `${n.nodeId} registered (session ${session.sessionId}): adopted ${adopted
          .map((a) => `${a.shardId} of ${a.replicaId}`)
          .join(", ")} as running`;
  const extra = [
    decisions.length > 0 ? `${decisions.length} shard(s) stopped` : "",
    gone.length > 0 ? `${gone.length} earlier shard(s) gone` : "",
  ]
    .filter((x) => x !== "")
    .join(", ");
  const head = decision(extra ? `${summary}; ${extra}` : summary, {
    case: "shardsAdopted",
    value: { nodeId: n.nodeId, sessionId: session.sessionId, shards: adopted },
  });
  const unit = { decisions: [head, ...decisions], commands };
  for (const g of gone) {
    const r = replicas.get(g.replicaId);
    if (!r) continue;
    const f = failReplica(pass, r, g.shardId, n.nodeId, "node re-registered without it");
    unit.decisions.push(...f.decisions);
    unit.commands.push(...f.commands);
  }
  return unit;
}

function lowestFreeRank(taken: number[]): number {
  let rank = 0;
  while (taken.includes(rank)) rank++;
  return rank;
}
