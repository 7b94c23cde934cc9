/**
 * A failure names its real reason: a replicaFailed decision whose reason is
 * a fact about a shard — it failed, stopped unasked, had its start refused,
 * never said STARTING in time, or stayed STARTING too long — must be backed
 * by that fact in the state the pass was folded onto. A reason the log
 * cannot back would send operators (and the model×node cooldown) after the
 * wrong cause.
 */
import { type ReconcilePass, ReplicaFailed_Reason } from "../gen/llmgw/v1/events_pb.js";
import type { FleetState, ShardState } from "../projections/index.js";
import type { CheckedEvent, Violation } from "./types.js";

export class FailureReasonRule {
  readonly violations: Violation[] = [];

  /** Called before the event is folded: `before` is the state the pass lands on. */
  observe(r: CheckedEvent, before: FleetState): void {
    const body = r.event.body;
    if (body.case !== "reconcilePass") return;
    const p: ReconcilePass = body.value;
    const nowMs = Number(p.nowUnixMs);
    for (const d of p.decisions) {
      if (d.kind.case !== "replicaFailed") continue;
      const f = d.kind.value;
      const shard = before.replicas.replicas.get(f.replicaId)?.shards.find((s) => s.shardId === f.shardId);
      const why = unbacked(f.reason, shard, nowMs);
      if (why === undefined) continue;
      this.violations.push({
        rule: "failure-reason",
        seq: r.seq,
        message: `pass at ${r.seq} fails ${f.replicaId} (shard ${f.shardId || "?"} on ${f.nodeId || "?"}) as ${ReplicaFailed_Reason[f.reason]}, but ${why}`,
      });
    }
  }
}

/** Why the log does not back the reason, or undefined when it does (or the reason is not a shard fact). */
function unbacked(
  reason: ReplicaFailed_Reason,
  s: ShardState | undefined,
  nowMs: number,
): string | undefined {
  const want = (ok: boolean, what: string) => (ok ? undefined : what);
  switch (reason) {
    case ReplicaFailed_Reason.SHARD_FAILED:
      return want(s?.fault?.kind === "failed", "the shard never reported FAILED while wanted running");
    case ReplicaFailed_Reason.UNREQUESTED_STOP:
      return want(s?.fault?.kind === "unrequested-stop", "no unrequested STOPPED of the shard is in the log");
    case ReplicaFailed_Reason.START_REFUSED:
      return want(s?.fault?.kind === "start-refused", "no refused start of the shard is in the log");
    case ReplicaFailed_Reason.START_TIMEOUT:
      return want(
        s !== undefined && s.state === "pending" && s.startDueMs > 0 && s.startDueMs <= nowMs,
        "the shard was not waiting past its start deadline",
      );
    case ReplicaFailed_Reason.READY_TIMEOUT:
      return want(s?.state === "starting", "the shard was not STARTING");
    default:
      // Lost nodes, incomplete adoption, undeliverable commands, logs older than reasons.
      return undefined;
  }
}
