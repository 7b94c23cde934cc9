/**
 * Rollouts. A replica placed with a spec revision its profile no longer has
 * (the catalog changed the profile's engine, arguments, environment or GPU
 * needs, or dropped the profile) is outdated; a model with outdated
 * replicas rolls, make-before-break, under its policy:
 *
 * - at most `maxSurge` replicas beyond what the model wants exist (a
 *   replacement is a new replica that `replaces` the old one, exactly as for
 *   a node drain: the slot is counted once, through the replacement);
 * - an old replica leaves (its drain removes it from the routing table in
 *   the same pass) only once its replacement is ready, and only while the
 *   model keeps at least `desired − maxUnavailable` ready replicas
 *   (`rolloutTakeDownAllowance`); with `maxUnavailable` > 0, old replicas
 *   beyond the surge are drained first and the scale rule creates their
 *   slots again on the new revision;
 * - a new replica that fails, or is not ready `progressDeadline` after it was
 *   created, stalls the rollout: no further old replica is replaced, the old
 *   ones keep serving, and a RolloutStalled decision says why. It moves
 *   again when that replica gets ready, or when the spec changes (undo).
 * - a paused rollout (operator intent) replaces nothing until resumed.
 *
 * A replacement that is itself outdated (the spec changed again, e.g. an
 * undo, before it was ready) is given up while its old replica still
 * serves: that replica may be current again.
 *
 * The decisions RolloutStarted and RolloutCompleted bracket it, so the log
 * (and explain, status, the check-log invariant) know when a model rolls.
 */
import type { Command, Decision } from "../../gen/llmgw/v1/events_pb.js";
import type { DeepReadonly } from "../../projections/index.js";
import {
  isReady,
  type ModelSpec,
  type ReplicaState,
  type RolloutState,
  staleRevision,
} from "../../projections/index.js";
import { disruptionBudget, rolloutAllowance } from "./budgets.js";
import { desiredReplicas } from "./desired.js";
import { drainUnit, replaceThenDrain } from "./drains.js";
import { type ReplicaClass, replicasWhere } from "./indexes.js";
import { decision, hasLiveReplacement } from "./messages.js";
import type { Pass } from "./pass.js";

type Unit = { decisions: Decision[]; commands: Command[] };

/**
 * A replica the rollout must deal with: placed on a stale revision, or a
 * replacement last placed on one. A pending replica that replaces nothing is
 * simply placed again, on the current revision.
 */
export function isOutdated(model: ModelSpec, r: DeepReadonly<ReplicaState>): boolean {
  return staleRevision(model, r) && (r.phase !== "pending" || r.replaces !== "");
}

export function rollModels(pass: Pass): void {
  const catalog = [...pass.work.replicas.catalog.models].sort((a, b) => (a.name < b.name ? -1 : 1));
  for (const m of catalog) if (!rollModel(pass, m)) return;
}

function modelReplicas(pass: Pass, model: string): DeepReadonly<ReplicaState>[] {
  return replicasWhere(pass.work, (c) => c.model === model && c.phase !== "draining")
    .filter((r) => r.phase !== "draining")
    .sort((a, b) => a.createdSeq - b.createdSeq || (a.replicaId < b.replicaId ? -1 : 1));
}

/**
 * How many ready replicas of `model` the rollout may take out of service
 * now: what is ready beyond `desired − maxUnavailable` (budgets.ts, which
 * node drains and GPU-fault moves ask too while a model rolls). A
 * disruption budget caps this.
 */
export function rolloutTakeDownAllowance(pass: Pass, model: ModelSpec): number {
  const rolling = rolloutAllowance(pass, model);
  const policy = rolling?.allowed ?? 0;
  // The model's disruption budget binds rollouts as it binds drains and GPU-fault moves.
  return Math.min(policy, disruptionBudget(pass, model.name).allowed);
}

/** The node a replica serves from (rank 0's), for what a blocked replacement names. */
const nodeOf = (r: DeepReadonly<ReplicaState>): string => r.shards[0]?.nodeId ?? "";

/** False when the pass is full. */
function rollModel(pass: Pass, m: ModelSpec): boolean {
  const state = pass.work.replicas.rollouts[m.name];
  // Whether a replica's revision is stale is known per group: only those replicas are read.
  const stale = (c: ReplicaClass) => c.model === m.name && c.phase !== "draining" && staleRevision(m, c);
  const outdated = replicasWhere(pass.work, stale)
    .filter((r) => isOutdated(m, r))
    .sort((a, b) => a.createdSeq - b.createdSeq || (a.replicaId < b.replicaId ? -1 : 1));
  if (outdated.length === 0) {
    if (!state?.active) return true;
    return pass.add(
      one(`rollout of ${m.name} to revision ${m.revision} completed: every replica runs it`, {
        case: "rolloutCompleted",
        value: { model: m.name, revision: m.revision },
      }),
    );
  }
  if (!state?.active || state.revision !== m.revision) {
    const desired = desiredReplicas(pass, m);
    const { maxSurge, maxUnavailable } = m.rollout;
    const started = one(
      `rollout of ${m.name} to revision ${m.revision}: ${outdated.length} replica(s) on an older revision (${outdated.map((r) => r.replicaId).join(", ")}); maxSurge ${maxSurge}, maxUnavailable ${maxUnavailable}, ${desired} desired`,
      {
        case: "rolloutStarted",
        value: {
          model: m.name,
          revision: m.revision,
          outdated: outdated.length,
          desired,
          maxSurge,
          maxUnavailable,
        },
      },
    );
    if (!pass.add(started)) return false;
  }
  const rollout = pass.work.replicas.rollouts[m.name] as RolloutState;
  if (rollout.paused) return true;
  if (!giveUpOutdatedReplacements(pass, m, outdated)) return false;
  if (!reportStall(pass, m, rollout)) return false;
  if (!drainReplaced(pass, m)) return false;
  if (rollout.stalled !== null) return true;
  return replaceOutdated(pass, m);
}

function one(explanation: string, kind: Parameters<typeof decision>[1]): Unit {
  return { decisions: [decision(explanation, kind)], commands: [] };
}

/** Outdated replacements (not ready) of replicas that still serve: removed, or drained when something of them runs. */
function giveUpOutdatedReplacements(
  pass: Pass,
  m: ModelSpec,
  outdated: DeepReadonly<ReplicaState>[],
): boolean {
  for (const r of outdated) {
    const old = r.replaces ? pass.work.replicas.replicas.get(r.replaces) : undefined;
    if (!old || old.phase === "draining" || old.replacedBy !== r.replicaId || isReady(r)) continue;
    const reason = `${r.replicaId} runs an older revision than ${m.name}'s ${m.revision}; ${old.replicaId} keeps its slot`;
    const unit = r.shards.every((s) => s.desired === "stopped")
      ? one(`${r.replicaId} removed: ${reason}`, {
          case: "replicaRemoved",
          value: { replicaId: r.replicaId, model: r.model, reason },
        })
      : drainUnit(pass, r, "", reason);
    if (!pass.add(unit)) return false;
  }
  return true;
}

/** New-revision replicas of this rollout that are not ready yet, oldest first. */
function inFlight(pass: Pass, m: ModelSpec, rollout: RolloutState): DeepReadonly<ReplicaState>[] {
  return modelReplicas(pass, m.name).filter(
    (r) => !isOutdated(m, r) && !isReady(r) && r.createdSeq >= rollout.startedSeq,
  );
}

/** Why the rollout cannot go on, or undefined. */
function stallOf(
  pass: Pass,
  m: ModelSpec,
  rollout: RolloutState,
): { replicaId: string; reason: string } | undefined {
  for (const r of inFlight(pass, m, rollout)) {
    const f = r.lastFailure;
    if (f !== null && f.seq >= rollout.startedSeq) {
      return {
        replicaId: r.replicaId,
        reason: `new replica ${r.replicaId} failed${f.nodeId ? ` on ${f.nodeId}` : ""} (${f.reason}): ${f.message}`,
      };
    }
    const late = pass.nowMs - r.createdMs;
    if (late >= m.rollout.progressDeadlineMs) {
      const where =
        r.phase === "pending" ? `pending${r.pendingReason ? `: ${r.pendingReason}` : ""}` : r.phase;
      return {
        replicaId: r.replicaId,
        reason: `new replica ${r.replicaId} not ready ${Math.round(late / 1000)}s after it was created (progress deadline ${Math.round(m.rollout.progressDeadlineMs / 1000)}s; it is ${where})`,
      };
    }
  }
  return undefined;
}

function reportStall(pass: Pass, m: ModelSpec, rollout: RolloutState): boolean {
  const stall = stallOf(pass, m, rollout);
  if (stall && rollout.stalled === null) {
    return pass.add(
      one(
        `rollout of ${m.name} to revision ${m.revision} stalled: ${stall.reason}; the old replicas keep serving (undo with \`llmgw rollout undo ${m.name}\`)`,
        { case: "rolloutStalled", value: { model: m.name, revision: m.revision, ...stall } },
      ),
    );
  }
  if (!stall && rollout.stalled !== null) {
    const id = rollout.stalled.replicaId;
    return pass.add(
      one(
        `rollout of ${m.name} to revision ${m.revision} progresses again: ${id} is no longer failing or late`,
        {
          case: "rolloutProgressing",
          value: { model: m.name, revision: m.revision, replicaId: id },
        },
      ),
    );
  }
  return true;
}

/** Old replicas whose replacement is ready leave, as far as the allowance goes. */
function drainReplaced(pass: Pass, m: ModelSpec): boolean {
  const models = new Set([m.name]);
  for (const r of modelReplicas(pass, m.name)) {
    if (!isOutdated(m, r) || r.phase === "pending" || !hasLiveReplacement(pass, r)) continue;
    const next = pass.work.replicas.replicas.get(r.replacedBy) as DeepReadonly<ReplicaState>;
    if (!isReady(next) || isOutdated(m, next)) continue;
    if (isReady(r) && rolloutTakeDownAllowance(pass, m) <= 0) return true;
    const unit = replaceThenDrain(
      pass,
      r,
      models,
      `rollout of ${m.name} to revision ${m.revision}`,
      nodeOf(r),
    );
    if (unit && !pass.add(unit)) return false;
  }
  return true;
}

/** Replacements within the surge; then, with maxUnavailable, old replicas drained ahead of theirs. */
function replaceOutdated(pass: Pass, m: ModelSpec): boolean {
  const models = new Set([m.name]);
  const desired = desiredReplicas(pass, m);
  // Not ready first: replacing those costs no capacity.
  const waiting = modelReplicas(pass, m.name)
    .filter((r) => isOutdated(m, r) && r.phase !== "pending" && !hasLiveReplacement(pass, r))
    .sort((a, b) => Number(isReady(a)) - Number(isReady(b)));
  const cause = `rollout of ${m.name} to revision ${m.revision}`;
  // Slots drained here that the scale rule fills after this rule.
  let refills = 0;
  for (const r of waiting) {
    const room = desired + m.rollout.maxSurge - modelReplicas(pass, m.name).length - refills;
    if (room > 0) {
      const unit = replaceThenDrain(
        pass,
        r,
        models,
        `${cause}: ${r.replicaId} runs ${r.revision}`,
        nodeOf(r),
      );
      if (unit && !pass.add(unit)) return false;
      continue;
    }
    if (isReady(r) && rolloutTakeDownAllowance(pass, m) <= 0) return true;
    // Break-before-make within maxUnavailable: the scale rule fills the slot on the new revision.
    if (!pass.add(drainUnit(pass, r, "", `${cause} (maxUnavailable ${m.rollout.maxUnavailable})`)))
      return false;
    refills++;
  }
  return true;
}
