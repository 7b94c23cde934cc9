/**
 * Start and ready deadlines: nothing stays placed-but-not-serving for ever.
 * - A shard whose start was sent must report STARTING within the profile's
 *   start timeout, whether or not the agent acknowledged the command.
 *   Otherwise the start is sent again with the same command id (the agent
 *   treats a repeat as the same request), the wait doubling with each send
 *   up to retryMaxMs (or the start timeout, if longer); after the profile's
 *   start attempts the replica fails (reason start-timeout).
 * - A shard STARTING for longer than the profile's ready timeout is stopped
 *   and its replica fails (reason ready-timeout).
 * Both count against the model on that node like any failure
 * (failures.ts), so the replacement goes elsewhere.
 */
import { create } from "@bufbuild/protobuf";
import { type Command, CommandSchema, ReplicaFailed_Reason } from "../../gen/llmgw/v1/events_pb.js";
import type { DeepReadonly, ProfileSpec, ReplicaState, ShardState } from "../../projections/index.js";
import { failedUnit } from "./failures.js";
import { replicasWhere } from "./indexes.js";
import { type LifecycleLimits, limitsFor, replicaProfile } from "./limits.js";
import { decision, reachable } from "./messages.js";
import type { Pass, Unit } from "./pass.js";
import { startShard } from "./start-shard.js";

export function enforceStartDeadlines(pass: Pass): void {
  for (const r of replicasWhere(pass.work, (c) => c.phase === "placed")) {
    if (r.phase !== "placed") continue;
    const profile = replicaProfile(pass.work.replicas.catalog.models, r);
    const limits = limitsFor(pass.config, profile);
    const unit = startOverdue(pass, r, profile, limits) ?? readyOverdue(pass, r, limits);
    if (unit && !pass.add(unit)) return;
  }
}

function startOverdue(
  pass: Pass,
  r: DeepReadonly<ReplicaState>,
  profile: ProfileSpec | undefined,
  limits: LifecycleLimits,
): Unit | undefined {
  const s = r.shards.find(
    (x) =>
      x.desired === "running" &&
      x.fault === null &&
      x.state === "pending" &&
      x.startCommandId !== "" &&
      x.startDueMs > 0 &&
      x.startDueMs <= pass.nowMs &&
      reachable(pass, x),
  );
  if (!s) return undefined;
  const waited = `no STARTING from ${s.nodeId} for shard ${s.shardId}`;
  if (s.startAttempts < limits.startAttempts && profile) {
    const attempt = s.startAttempts + 1;
    const wait = Math.min(
      Math.max(pass.config.retryMaxMs, limits.startTimeoutMs),
      limits.startTimeoutMs * 2 ** s.startAttempts,
    );
    const due = pass.nowMs + wait;
    return {
      decisions: [
        decision(
          `${waited} after start ${s.startAttempts} of ${limits.startAttempts}; sending it again (attempt ${attempt}), STARTING due in ${Math.round(wait / 1000)}s`,
          {
            case: "commandReissued",
            value: { commandId: s.startCommandId, attempt, nextRetryUnixMs: BigInt(due) },
          },
        ),
      ],
      commands: [startAgain(pass, r, s, profile, attempt, due)],
    };
  }
  return failedUnit(
    pass,
    r,
    s,
    `${waited} after ${s.startAttempts} start(s), each allowed at least ${Math.round(limits.startTimeoutMs / 1000)}s`,
    // An engine that comes up late must not hold the GPUs the replacement may need.
    { reason: ReplicaFailed_Reason.START_TIMEOUT, stopFailing: true },
  );
}

function readyOverdue(pass: Pass, r: DeepReadonly<ReplicaState>, limits: LifecycleLimits): Unit | undefined {
  const s = r.shards.find(
    (x) =>
      x.desired === "running" &&
      x.fault === null &&
      x.state === "starting" &&
      x.startingSinceMs > 0 &&
      x.startingSinceMs + limits.readyTimeoutMs <= pass.nowMs,
  );
  if (!s) return undefined;
  return failedUnit(
    pass,
    r,
    s,
    `shard ${s.shardId} on ${s.nodeId} STARTING for ${Math.round((pass.nowMs - s.startingSinceMs) / 1000)}s, past its ready timeout of ${Math.round(limits.readyTimeoutMs / 1000)}s; stopping it`,
    { reason: ReplicaFailed_Reason.READY_TIMEOUT, lastOutput: s.lastOutput, stopFailing: true },
  );
}

/** The shard's start command again: same id, so an agent that did start it answers with its state. */
function startAgain(
  pass: Pass,
  r: DeepReadonly<ReplicaState>,
  s: DeepReadonly<ShardState>,
  p: ProfileSpec,
  attempt: number,
  dueMs: number,
): Command {
  return create(CommandSchema, {
    commandId: s.startCommandId,
    nodeId: s.nodeId,
    sessionId: s.sessionId,
    replicaId: r.replicaId,
    attempt,
    deadlineUnixMs: BigInt(dueMs),
    action: { case: "start", value: startShard(s.startCommandId, r, p, r.shards, s, pass.work.inventory) },
  });
}
