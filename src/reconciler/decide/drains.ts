/**
 * Drains. Node drain is make-before-break: every replica with a shard on a
 * draining node gets a replacement; once the replacement runs, the old one
 * drains. A model with a disruption budget (minAvailable) lets a ready
 * replica go before its replacement is ready while the budget allows it,
 * and keeps it serving (a DisruptionBlocked decision says why) while taking
 * it would leave fewer ready than minAvailable. While the model rolls, its
 * rollout's promise binds a drain too: a ready replica stays while taking
 * it would leave fewer ready than `desired − maxUnavailable`, replacement
 * ready or not (budgets.ts, `rolloutAllowance`). A draining replica is
 * removed once its shards have stopped (or failed, or their node's session
 * is gone), or at its drain deadline, when what still runs is stopped.
 */
import type { Command, Decision } from "../../gen/llmgw/v1/events_pb.js";
import type { DeepReadonly } from "../../projections/index.js";
import { isReady, type ReplicaState } from "../../projections/index.js";
import { type DisruptionBudget, disruptionBudget, type RolloutFloor, rolloutAllowance } from "./budgets.js";
import { drainingNode, nodeIds, replicasWhere } from "./indexes.js";
import {
  decision,
  drainCommand,
  drainDeadline,
  finished,
  hasLiveReplacement,
  reachable,
  stopCommand,
} from "./messages.js";
import type { Pass } from "./pass.js";

/** The unit that starts (or restates) a replica's drain, with drain commands for its reachable shards. */
export function drainUnit(
  pass: Pass,
  r: DeepReadonly<ReplicaState>,
  replacementId: string,
  reason: string,
): { decisions: Decision[]; commands: Command[] } {
  const deadline = drainDeadline(pass, r);
  const commands = r.shards
    .filter((s) => s.desired === "running" && !finished(s) && reachable(pass, s))
    .map((s) => drainCommand(pass, { ...s, replicaId: r.replicaId }, deadline));
  return {
    decisions: [
      decision(
        `${r.replicaId} drains: ${reason}${commands.length > 0 ? ` (${commands.length} shard(s))` : ""}`,
        {
          case: "replicaDrainStarted",
          value: { replicaId: r.replicaId, replacementId, reason },
        },
      ),
    ],
    commands,
  };
}

export function handleDrains(pass: Pass): void {
  const models = new Set(pass.work.replicas.catalog.models.map((m) => m.name));
  // With no node draining, only draining replicas have anything to do here.
  const candidates =
    nodeIds(pass.work, drainingNode).length > 0
      ? pass.work.replicas.replicas.sortedValues()
      : replicasWhere(pass.work, (c) => c.phase === "draining");
  for (const r of candidates) {
    const unit = r.phase === "draining" ? finishDrain(pass, r) : moveOff(pass, r, models);
    if (unit && !pass.add(unit)) return;
  }
}

function moveOff(
  pass: Pass,
  r: DeepReadonly<ReplicaState>,
  models: Set<string>,
): { decisions: Decision[]; commands: Command[] } | undefined {
  const nodes = pass.work.inventory.nodes;
  const onDraining = r.shards.find((s) => s.desired === "running" && nodes.get(s.nodeId)?.draining === true);
  if (!onDraining) return undefined;
  return replaceThenDrain(pass, r, models, `node ${onDraining.nodeId} is draining`, onDraining.nodeId);
}

/**
 * Make-before-break for a replica that must leave where it runs (`cause`
 * says why, on `nodeId`): a replacement is created; once it runs, the
 * replica drains. Nothing while the replacement is on its way, unless the
 * model's disruption budget allows taking the replica now; a budget that
 * forbids taking a ready replica keeps it serving and says so, once per
 * reason. While the model rolls, a ready replica also stays (and says so)
 * as long as taking it would break the rollout's maxUnavailable.
 */
export function replaceThenDrain(
  pass: Pass,
  r: DeepReadonly<ReplicaState>,
  models: ReadonlySet<string>,
  cause: string,
  nodeId: string,
): { decisions: Decision[]; commands: Command[] } | undefined {
  if (hasLiveReplacement(pass, r)) {
    const next = pass.work.replicas.replicas.get(r.replacedBy) as DeepReadonly<ReplicaState>;
    // Make-before-break waits for ready (every shard RUNNING), not for placed.
    const nextReady = isReady(next);
    // A replica that serves nothing takes nothing away: no budget to ask.
    const serving = isReady(r) && models.has(r.model);
    const budget = serving ? disruptionBudget(pass, r.model) : undefined;
    // Without a budget that lets it go early, a replica waits for its
    // replacement anyway: no floor to ask, nothing to say.
    if (budget?.stated === undefined && !nextReady) return undefined;
    // Asked only where a drain would follow, so a rollout's floor is
    // recorded only when it is what holds the replica.
    const spec = serving ? pass.work.replicas.catalog.models.find((m) => m.name === r.model) : undefined;
    const rollout = spec ? rolloutAllowance(pass, spec) : undefined;
    if (rollout !== undefined && rollout.allowed <= 0) {
      return blockedByRollout(r, next, nextReady, rollout, cause, nodeId);
    }
    if (budget?.stated === undefined) {
      return drainUnit(pass, r, next.replicaId, `${cause} and replacement ${next.replicaId} runs`);
    }
    if (budget.allowed > 0) {
      const why = nextReady
        ? `${cause} and replacement ${next.replicaId} runs`
        : `${cause}; ${budgetText(budget)} allows one fewer before replacement ${next.replicaId} is ready`;
      return drainUnit(pass, r, next.replicaId, why);
    }
    return blocked(r, next, nextReady, budget, cause, nodeId);
  }
  // A model gone from the catalog is drained by the scale rule, not replaced.
  if (!models.has(r.model) || r.phase === "pending") return undefined;
  const id = pass.newReplicaId(r.model);
  return {
    decisions: [
      decision(`${id} created to replace ${r.replicaId}: ${cause} (make-before-break)`, {
        case: "replicaCreated",
        value: { replicaId: id, model: r.model, replaces: r.replicaId },
      }),
    ],
    commands: [],
  };
}

function budgetText(b: DisruptionBudget): string {
  const of = b.stated === String(b.minAvailable) ? "" : ` (${b.stated} of ${b.desired} desired)`;
  return `${b.model} has ${b.ready} ready, minAvailable ${b.minAvailable}${of}`;
}

/** The DisruptionBlocked unit of the disruption budget, or nothing when the same wait is already recorded. */
function blocked(
  r: DeepReadonly<ReplicaState>,
  next: DeepReadonly<ReplicaState>,
  nextReady: boolean,
  b: DisruptionBudget,
  cause: string,
  nodeId: string,
): { decisions: Decision[]; commands: Command[] } | undefined {
  const floor = { ready: b.ready, minAvailable: b.minAvailable, desired: b.desired };
  return blockedUnit(r, next, nextReady, cause, nodeId, floor, budgetText(b));
}

/** The DisruptionBlocked unit of a rollout's maxUnavailable, or nothing when the same wait is already recorded. */
function blockedByRollout(
  r: DeepReadonly<ReplicaState>,
  next: DeepReadonly<ReplicaState>,
  nextReady: boolean,
  f: RolloutFloor,
  cause: string,
  nodeId: string,
): { decisions: Decision[]; commands: Command[] } | undefined {
  const floor = { ready: f.ready, minAvailable: f.floor, desired: f.desired };
  const why = `${r.model} rolls with ${f.ready} ready, and its rollout keeps ${f.floor} (${f.desired} desired − maxUnavailable ${f.maxUnavailable})`;
  return blockedUnit(r, next, nextReady, cause, nodeId, floor, why);
}

/** A replica kept serving because taking it out would break `why`: the one place its decision is made. */
function blockedUnit(
  r: DeepReadonly<ReplicaState>,
  next: DeepReadonly<ReplicaState>,
  nextReady: boolean,
  cause: string,
  nodeId: string,
  floor: { ready: number; minAvailable: number; desired: number },
  why: string,
): { decisions: Decision[]; commands: Command[] } | undefined {
  const until = nextReady ? "more replicas of it are ready" : `replacement ${next.replicaId} is ready`;
  const explanation = `${r.replicaId} keeps serving: ${cause}, but ${why}; taking it out would leave ${floor.ready - 1}; waits until ${until}`;
  if (r.disruptionBlocked === explanation) return undefined;
  const value = {
    replicaId: r.replicaId,
    model: r.model,
    nodeId,
    cause,
    ...floor,
    replacementId: next.replicaId,
  };
  return { decisions: [decision(explanation, { case: "disruptionBlocked", value })], commands: [] };
}

function finishDrain(
  pass: Pass,
  r: DeepReadonly<ReplicaState>,
): { decisions: Decision[]; commands: Command[] } | undefined {
  const left = r.shards.filter((s) => s.desired !== "stopped" && !finished(s) && reachable(pass, s));
  const removed = (why: string, commands: Command[] = []) => ({
    decisions: [
      decision(`${r.replicaId} removed: ${why}`, {
        case: "replicaRemoved",
        value: { replicaId: r.replicaId, model: r.model, reason: r.drainReason || why },
      }),
    ],
    commands,
  });
  if (left.length === 0) return removed(`drained (${r.drainReason || "drain"})`);
  const deadline = drainDeadline(pass, r);
  if (pass.nowMs >= deadline) {
    return removed(
      `drain deadline ${new Date(deadline).toISOString()} of ${r.replicaId} passed (drain started ${new Date(r.drainStartedMs).toISOString()}) with ${left.length} shard(s) still running; stopping ${left.map((s) => `${s.shardId} on ${s.nodeId}`).join(", ")}`,
      left.map((s) => stopCommand(pass, { ...s, replicaId: r.replicaId })),
    );
  }
  // A shard re-adopted while its replica drains is asked to drain too.
  if (left.some((s) => s.desired === "running")) {
    return drainUnit(pass, r, r.replacedBy, r.drainReason || "draining");
  }
  return undefined;
}
