/**
 * Scale: each catalog model gets replicas created until it has as many as
 * it wants; extra ones are drained, those that serve nothing first (not
 * ready: pending, loading, failed), then newest first, so that a scale-down
 * never takes a ready replica while one that is not ready stays. Every
 * replica of a model gone from the catalog is drained newest first. A
 * replica never placed is simply removed.
 */
import type { Command, Decision } from "../../gen/llmgw/v1/events_pb.js";
import { type DeepReadonly, isReady, type ReplicaState } from "../../projections/index.js";
import { activeReplicas, countActiveReplicas } from "./active.js";
import { desiredReplicas } from "./desired.js";
import { drainUnit } from "./drains.js";
import { replicasWhere } from "./indexes.js";
import { decision } from "./messages.js";
import type { Pass } from "./pass.js";

export function scaleModels(pass: Pass): void {
  const catalog = pass.work.replicas.catalog.models;
  for (const m of catalog) {
    const want = desiredReplicas(pass, m);
    // Counting reads no replica; the list is only needed to scale down.
    const count = countActiveReplicas(pass, m.name);
    if (count === want) continue;
    const active = count > want ? activeReplicas(pass, m.name) : [];
    for (let have = count; have < want; have++) {
      const id = pass.newReplicaId(m.name);
      const ok = pass.add({
        decisions: [
          // Joined flat: the explanation lives as long as the pass's output (one per replica created).
          decision([id, " created: ", m.name, " has ", have, "/", want, " replicas"].join(""), {
            case: "replicaCreated",
            value: { replicaId: id, model: m.name, replaces: "" },
          }),
        ],
        commands: [],
      });
      if (!ok) return;
    }
    const extra = count - want;
    const order = scaleDownOrder(pass, active);
    for (let i = 0; i < extra; i++) {
      const r = order[i] as DeepReadonly<ReplicaState>;
      if (!pass.add(retire(pass, r, `${m.name} scaled down to ${want}`))) return;
    }
  }
  const names = new Set(catalog.map((m) => m.name));
  const orphans = replicasWhere(pass.work, (c) => !names.has(c.model) && c.phase !== "draining")
    .filter((r) => !names.has(r.model) && r.phase !== "draining")
    .sort((a, b) => b.createdSeq - a.createdSeq || (a.replicaId < b.replicaId ? 1 : -1));
  for (const r of orphans) {
    if (!pass.add(retire(pass, r, `model ${r.model} is no longer in the catalog`))) return;
  }
}

/**
 * Which replicas a scale-down takes, first to last: slots that serve nothing
 * before slots that serve (taking one that serves nothing costs no
 * capacity), newest first within each. A replacement's slot serves while the
 * replica it replaces does: retiring the replacement drains that one too.
 */
export function scaleDownOrder(
  pass: Pass,
  active: readonly DeepReadonly<ReplicaState>[],
): DeepReadonly<ReplicaState>[] {
  const newestFirst = [...active].reverse();
  const serves = (r: DeepReadonly<ReplicaState>): boolean => {
    if (isReady(r)) return true;
    const old = r.replaces ? pass.work.replicas.replicas.get(r.replaces) : undefined;
    return old !== undefined && old.phase !== "draining" && old.replacedBy === r.replicaId && isReady(old);
  };
  return [...newestFirst.filter((r) => !serves(r)), ...newestFirst.filter(serves)];
}

/** Drains a replica, or removes it at once when nothing of it runs. A replacement takes the replica it replaces along. */
function retire(
  pass: Pass,
  r: DeepReadonly<ReplicaState>,
  reason: string,
): { decisions: Decision[]; commands: Command[] } {
  const unit = one(pass, r, reason);
  const old = r.replaces ? pass.work.replicas.replicas.get(r.replaces) : undefined;
  if (old && old.phase !== "draining" && old.replacedBy === r.replicaId) {
    const more = one(pass, old, reason);
    unit.decisions.push(...more.decisions);
    unit.commands.push(...more.commands);
  }
  return unit;
}

function one(
  pass: Pass,
  r: DeepReadonly<ReplicaState>,
  reason: string,
): { decisions: Decision[]; commands: Command[] } {
  if (r.shards.every((s) => s.desired === "stopped")) {
    return {
      decisions: [
        decision(`${r.replicaId} removed: ${reason} (it was not placed)`, {
          case: "replicaRemoved",
          value: { replicaId: r.replicaId, model: r.model, reason },
        }),
      ],
      commands: [],
    };
  }
  return drainUnit(pass, r, "", reason);
}
