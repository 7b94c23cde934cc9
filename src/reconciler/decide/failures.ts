/**
 * Failures. A shard the fold marked faulty — it failed, stopped without
 * being asked, or the agent refused its start — fails its replica at once:
 * the other shards are stopped and the replica is placed again after a
 * crash-loop backoff that doubles with each restart. Every such failure
 * counts against the model on that node, and after cooldownFailures (1 by
 * default) the pair is put on cooldown, so the replacement goes elsewhere.
 * A replica adopted with fewer shards than its profile needs cannot serve:
 * it fails too.
 */
import { ReplicaFailed_Reason } from "../../gen/llmgw/v1/events_pb.js";
import type { DeepReadonly, ReplicaState, ShardFault, ShardState } from "../../projections/index.js";
import { type ReplicaClass, replicasWhere } from "./indexes.js";
import { replicaProfile } from "./limits.js";
import { decision, type FailureDetail, failReplica } from "./messages.js";
import type { Pass, Unit } from "./pass.js";

export function handleFailures(pass: Pass): void {
  for (const r of replicasWhere(pass.work, (c) => c.faulted && c.phase !== "draining")) {
    if (r.phase === "draining") continue;
    const s = r.shards.find((x) => x.fault !== null && x.desired === "running");
    if (!s?.fault) continue;
    const unit = failedUnit(pass, r, s, s.fault.message, {
      reason: reasonOf(s.fault),
      exitCode: s.exitCode,
      lastOutput: s.lastOutput,
    });
    if (!pass.add(unit)) return;
  }
}

function reasonOf(f: ShardFault): ReplicaFailed_Reason {
  switch (f.kind) {
    case "failed":
      return ReplicaFailed_Reason.SHARD_FAILED;
    case "unrequested-stop":
      return ReplicaFailed_Reason.UNREQUESTED_STOP;
    case "start-refused":
      return ReplicaFailed_Reason.START_REFUSED;
    default: {
      const never: never = f.kind;
      return never;
    }
  }
}

/** A replica failed by one of its shards, with the crash-loop backoff before it is placed again. */
export function failedUnit(
  pass: Pass,
  r: DeepReadonly<ReplicaState>,
  s: DeepReadonly<ShardState>,
  error: string,
  detail: FailureDetail,
): Unit {
  const { crashBackoffBaseMs, crashBackoffMaxMs } = pass.config;
  const unit = failReplica(pass, r, s.shardId, s.nodeId, error, detail);
  if (unit.decisions[0]?.kind.case === "replicaFailed") {
    const restarts = r.restarts + 1;
    const wait = Math.min(crashBackoffMaxMs, crashBackoffBaseMs * 2 ** r.restarts);
    const until = pass.nowMs + wait;
    unit.decisions.push(
      decision(
        `${r.replicaId} restart ${restarts}: waits ${Math.round(wait / 1000)}s before it is placed again`,
        {
          case: "shardBackoff",
          value: { replicaId: r.replicaId, restarts, untilUnixMs: BigInt(until) },
        },
      ),
    );
  }
  return unit;
}

/** Model×node pairs that reached cooldownFailures (counted by the fold from this and earlier passes' failures). */
export function startCooldowns(pass: Pass): void {
  const { cooldownFailures, cooldownMs } = pass.config;
  const failures = pass.work.replicas.failures;
  for (const key of Object.keys(failures).sort()) {
    const count = failures[key] ?? 0;
    if (count < cooldownFailures) continue;
    const at = key.lastIndexOf("@");
    const model = key.slice(0, at);
    const nodeId = key.slice(at + 1);
    const until = pass.nowMs + cooldownMs;
    const ok = pass.add({
      decisions: [
        decision(
          `${model} failed ${count} time${count === 1 ? "" : "s"} on ${nodeId}: placement avoids the pair for ${Math.round(cooldownMs / 1000)}s`,
          {
            case: "cooldownStarted",
            value: { model, nodeId, failures: count, untilUnixMs: BigInt(until) },
          },
        ),
      ],
      commands: [],
    });
    if (!ok) return;
  }
}

/** Replicas adopted with missing shards: once every node's registration is handled, they are failed. */
export function failIncomplete(pass: Pass): void {
  const catalog = pass.work.replicas.catalog.models;
  // Whether a replica holds fewer shards than its profile wants is known per group.
  const incomplete = (c: ReplicaClass) => {
    if (c.phase === "draining" || c.phase === "pending") return false;
    const p = replicaProfile(catalog, c);
    return p !== undefined && c.held < Math.max(1, p.shards);
  };
  for (const r of replicasWhere(pass.work, incomplete)) {
    if (r.phase === "draining" || r.phase === "pending" || r.shards.length === 0) continue;
    const p = replicaProfile(catalog, r);
    if (!p) continue;
    const want = Math.max(1, p.shards);
    const held = r.shards.filter((s) => s.desired !== "stopped");
    if (held.length >= want) continue;
    const first = held[0];
    const unit = failReplica(
      pass,
      r,
      "",
      "",
      `incomplete: ${held.length} of ${want} shards registered${first ? ` (on ${held.map((s) => s.nodeId).join(", ")})` : ""}`,
      { reason: ReplicaFailed_Reason.INCOMPLETE },
    );
    if (!pass.add(unit)) return;
  }
}
