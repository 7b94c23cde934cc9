/**
 * Placement of pending replicas (past their backoff), oldest first. Each is
 * placed with the first profile that fits, start commands going to the
 * chosen nodes' current sessions; or it is recorded as pending with the
 * reasons — only when the reasons changed, so a stuck replica does not add
 * a decision to every pass.
 */
import type { ModelSpec, ReplicaState } from "../../projections/index.js";
import { FleetView, type NoFit, type Placed, placeReplica } from "../placement/index.js";
import { replicasWhere } from "./indexes.js";
import { limitsFor } from "./limits.js";
import { decision, startCommand } from "./messages.js";
import type { Pass } from "./pass.js";
import { startShardFields } from "./start-shard.js";

export function placePending(pass: Pass): void {
  const catalog = new Map(pass.work.replicas.catalog.models.map((m) => [m.name, m]));
  const pending = replicasWhere(pass.work, (c) => c.phase === "pending")
    .filter((r) => r.phase === "pending" && r.backoffUntilMs <= pass.nowMs && catalog.has(r.model))
    .sort((a, b) => a.createdSeq - b.createdSeq || (a.replicaId < b.replicaId ? -1 : 1));
  if (pending.length === 0) return;
  const view = new FleetView(pass.work, pass.nowMs, pass.unadopted);
  // Placement only takes GPUs, so a model that did not fit once in this pass fits no better later in it.
  const noFit = new Map<string, NoFit>();
  for (const r of pending) {
    const model = catalog.get(r.model) as ModelSpec;
    const result = noFit.get(model.name) ?? placeReplica(view, model, pass.config.policy);
    if (result.kind === "pending") {
      noFit.set(model.name, result);
      if (result.explanation === r.pendingReason) continue;
      const ok = pass.add({
        decisions: [
          decision(result.explanation, {
            case: "replicaPending",
            value: {
              replicaId: r.replicaId,
              model: r.model,
              nodesConsidered: result.nodesConsidered,
              nodesFit: result.nodesFit,
              ruledOut: result.ruledOut,
            },
          }),
        ],
        commands: [],
      });
      if (!ok) return;
      continue;
    }
    if (!pass.add(placedUnit(pass, r, model, result))) return;
  }
}

function placedUnit(pass: Pass, r: ReplicaState, model: ModelSpec, p: Placed) {
  const shards = p.shards.map((s) => ({ ...s, shardId: pass.shardId(r.replicaId, s.rank) }));
  const replica = { replicaId: r.replicaId, model: model.name };
  const commands = shards.map((s) =>
    startCommand(
      pass,
      s.nodeId,
      s.sessionId,
      limitsFor(pass.config, p.profile).startTimeoutMs,
      startShardFields(replica, p.profile, shards, s, pass.work.inventory),
    ),
  );
  const where = shards.map((s) => `${s.nodeId} [${s.gpuIndices.join(",")}]`).join(" + ");
  const runners =
    p.runnersUp.length === 0
      ? "no runner-up"
      : `runners-up ${p.runnersUp.map((c) => `${c.nodeIds.join("+")} (${c.score.toFixed(2)})`).join(", ")}`;
  const explanation = `placed ${r.replicaId} (${model.name}/${p.profile.name} revision ${p.profile.revision}) on ${where}, ${pass.config.policy} score ${p.chosen.score.toFixed(2)}; ${runners}`;
  return {
    decisions: [
      decision(explanation, {
        case: "replicaPlaced",
        value: {
          replicaId: r.replicaId,
          model: model.name,
          profile: p.profile.name,
          shards: shards.map((s) => ({
            shardId: s.shardId,
            rank: s.rank,
            nodeId: s.nodeId,
            sessionId: s.sessionId,
            gpuIndices: s.gpuIndices,
          })),
          chosen: p.chosen,
          runnersUp: p.runnersUp,
          policy: pass.config.policy,
          revision: p.profile.revision,
        },
      }),
    ],
    commands,
  };
}
