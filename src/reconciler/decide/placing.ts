/**
 * Placement of pending replicas (past their backoff), oldest first. Each is
 * placed with the first profile that fits, start commands going to the
 * chosen nodes' current sessions; or it is recorded as pending with the
 * reasons — only when the reasons changed, so a stuck replica does not add
 * a decision to every pass.
 */
import { create } from "@bufbuild/protobuf";
import { type Command, type ShardPlacement, ShardPlacementSchema } from "../../gen/llmgw/v1/events_pb.js";
import type { DeepReadonly, ModelSpec, ReplicaState } from "../../projections/index.js";
import {
  FleetView,
  type NoFit,
  type Placed,
  placeReplica,
  type ScoredCandidate,
} from "../placement/index.js";
import { replicasWhere } from "./indexes.js";
import { limitsFor } from "./limits.js";
import { decision, startCommand } from "./messages.js";
import type { Pass, Unit } from "./pass.js";
import { startShard } from "./start-shard.js";

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

/**
 * The decision and start commands of a placed replica. Built with loops
 * and one message per shard (no copies in between): a full placement
 * makes one per replica.
 */
function placedUnit(pass: Pass, r: DeepReadonly<ReplicaState>, model: ModelSpec, p: Placed): Unit {
  const shards: ShardPlacement[] = [];
  for (const s of p.shards) {
    shards.push(
      create(ShardPlacementSchema, {
        shardId: pass.shardId(r.replicaId, s.rank),
        rank: s.rank,
        nodeId: s.nodeId,
        sessionId: s.sessionId,
        gpuIndices: s.gpuIndices,
      }),
    );
  }
  const startTimeoutMs = limitsFor(pass.config, p.profile).startTimeoutMs;
  const inventory = pass.work.inventory;
  const commands: Command[] = [];
  // The explanation is joined from its parts in one flat string: built with
  // `+` or a template, its pieces stay linked in the decision for as long
  // as the pass's output lives, about three times the string's own size.
  const say = [
    "placed ",
    r.replicaId,
    " (",
    model.name,
    "/",
    p.profile.name,
    " revision ",
    p.profile.revision,
    ") on ",
  ];
  for (let i = 0; i < shards.length; i++) {
    const s = shards[i] as ShardPlacement;
    const start = startShard(pass.newCommandId(), r, p.profile, shards, s, inventory);
    commands.push(startCommand(pass, s.nodeId, s.sessionId, startTimeoutMs, start));
    say.push(i > 0 ? " + " : "", s.nodeId, " [", s.gpuIndices.join(","), "]");
  }
  say.push(", ", pass.config.policy, " score ", twoDecimals(p.chosen.score), "; ");
  say.push(p.runnersUp.length === 0 ? "no runner-up" : "runners-up ");
  for (let i = 0; i < p.runnersUp.length; i++) {
    const c = p.runnersUp[i] as ScoredCandidate;
    say.push(i > 0 ? ", " : "", c.nodeIds.join("+"), " (", twoDecimals(c.score), ")");
  }
  const explanation = say.join("");
  return {
    decisions: [
      decision(explanation, {
        case: "replicaPlaced",
        value: {
          replicaId: r.replicaId,
          model: model.name,
          profile: p.profile.name,
          shards,
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

/** Scores as explanations print them; a fleet has few distinct scores, so each is formatted once. */
const formatted = new Map<number, string>();

function twoDecimals(x: number): string {
  let s = formatted.get(x);
  if (s === undefined) {
    s = x.toFixed(2);
    if (formatted.size < 10_000) formatted.set(x, s);
  }
  return s;
}
