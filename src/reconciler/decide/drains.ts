/**
 * Drains. Node drain is make-before-break: every replica with a shard on a
 * draining node gets a replacement; once the replacement runs, the old one
 * drains. A draining replica is removed once its shards have stopped (or
 * failed, or their node's session is gone), or at its drain deadline, when
 * what still runs is stopped.
 */
import type { Command, Decision } from "../../gen/llmgw/v1/events_pb.js";
import { isReady, type ReplicaState } from "../../projections/index.js";
import {
  decision,
  drainCommand,
  drainDeadline,
  finished,
  hasLiveReplacement,
  reachable,
  sortedValues,
  stopCommand,
} from "./messages.js";
import type { Pass } from "./pass.js";

/** The unit that starts (or restates) a replica's drain, with drain commands for its reachable shards. */
export function drainUnit(
  pass: Pass,
  r: ReplicaState,
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
  for (const r of sortedValues(pass.work.replicas.replicas)) {
    const unit = r.phase === "draining" ? finishDrain(pass, r) : moveOff(pass, r, models);
    if (unit && !pass.add(unit)) return;
  }
}

function moveOff(
  pass: Pass,
  r: ReplicaState,
  models: Set<string>,
): { decisions: Decision[]; commands: Command[] } | undefined {
  const nodes = pass.work.inventory.nodes;
  const onDraining = r.shards.find((s) => s.desired === "running" && nodes[s.nodeId]?.draining === true);
  if (!onDraining) return undefined;
  return replaceThenDrain(pass, r, models, `node ${onDraining.nodeId} is draining`);
}

/**
 * Make-before-break for a replica that must leave where it runs (`cause`
 * says why): a replacement is created; once it runs, the replica drains.
 * Nothing while the replacement is on its way.
 */
export function replaceThenDrain(
  pass: Pass,
  r: ReplicaState,
  models: ReadonlySet<string>,
  cause: string,
): { decisions: Decision[]; commands: Command[] } | undefined {
  if (hasLiveReplacement(pass, r)) {
    const next = pass.work.replicas.replicas[r.replacedBy] as ReplicaState;
    // Make-before-break waits for ready (every shard RUNNING), not for placed.
    if (!isReady(next)) return undefined;
    return drainUnit(pass, r, next.replicaId, `${cause} and replacement ${next.replicaId} runs`);
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

function finishDrain(
  pass: Pass,
  r: ReplicaState,
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
