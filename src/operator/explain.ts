/**
 * The reconciler decisions that touched one replica, read from its passes in
 * the log: why it exists, where it went and why, why it waits.
 */
import { toJson } from "@bufbuild/protobuf";
import { type Decision, DecisionSchema, type ReconcilePass } from "../gen/llmgw/v1/events_pb.js";
import type { Log } from "../log/index.js";

export interface ExplainedDecision {
  /** Sequence of the pass in the log. */
  seq: number;
  timeMs: number;
  leaderId: string;
  trigger: string;
  kind: string;
  explanation: string;
  /** The decision as protobuf JSON. */
  decision: unknown;
}

/** Whether a decision is about `replicaId` (as the replica, its replacement or the one it replaces). */
export function decisionTouchesReplica(d: Decision, replicaId: string): boolean {
  const k = d.kind;
  switch (k.case) {
    case "replicaCreated":
      return k.value.replicaId === replicaId || k.value.replaces === replicaId;
    case "replicaPlaced":
    case "replicaPending":
    case "replicaRemoved":
    case "shardBackoff":
    case "replicaFailed":
    case "duplicateStopped":
    case "shardUnclaimed":
      return k.value.replicaId === replicaId;
    case "replicaDrainStarted":
      return k.value.replicaId === replicaId || k.value.replacementId === replicaId;
    case "shardsAdopted":
      return k.value.shards.some((s) => s.replicaId === replicaId);
    case "nodeLiveness":
    case "sessionsExpired":
    case "commandReissued":
    case "cooldownStarted":
    case undefined:
      return false;
    default: {
      const never: never = k;
      return never;
    }
  }
}

export function decisionsTouchingReplica(pass: ReconcilePass, replicaId: string): Decision[] {
  return pass.decisions.filter((d) => decisionTouchesReplica(d, replicaId));
}

/**
 * Reads the reconciler's passes from `fromSeq` up to `untilSeq` and returns
 * the decisions about the replica, oldest first (at most `limit`, the newest kept).
 */
export async function explainReplica(
  log: Log,
  replicaId: string,
  opts: { fromSeq?: number; untilSeq?: number; limit?: number } = {},
): Promise<ExplainedDecision[]> {
  const limit = opts.limit ?? 500;
  const out: ExplainedDecision[] = [];
  for await (const r of log.read({
    fromSeq: opts.fromSeq ?? 1,
    ...(opts.untilSeq === undefined ? {} : { untilSeq: opts.untilSeq }),
    subjects: [log.subjects.reconciler],
  })) {
    if (r.event.body.case !== "reconcilePass") continue;
    const pass = r.event.body.value;
    for (const d of decisionsTouchingReplica(pass, replicaId)) {
      out.push({
        seq: r.seq,
        timeMs: r.timeMs,
        leaderId: pass.leaderId,
        trigger: pass.trigger,
        kind: d.kind.case ?? "unknown",
        explanation: d.explanation,
        decision: toJson(DecisionSchema, d),
      });
      if (out.length > limit) out.shift();
    }
  }
  return out;
}
