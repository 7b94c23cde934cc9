/**
 * Checks over a whole log that the reconciler's passes kept the invariants
 * a leader change must not break (DESIGN §8: 1 and 4).
 */
import { Liveness, type ReconcilePass } from "../../src/gen/llmgw/v1/events_pb.js";
import type { LogRecord } from "../../src/log/index.js";
import { evolveFleet, initialFleet } from "../../src/projections/index.js";

export interface PassRecord {
  seq: number;
  pass: ReconcilePass;
}

export function passesOf(records: LogRecord[]): PassRecord[] {
  const out: PassRecord[] = [];
  for (const r of records)
    if (r.event.body.case === "reconcilePass") out.push({ seq: r.seq, pass: r.event.body.value });
  return out;
}

/**
 * Returns every violation found (empty when none):
 * - fencing: each pass decided on a state that had folded the pass before it
 *   (its observed sequence is at or past it), so no two passes acted from
 *   the same log position;
 * - no slot started twice: a StartShard for (replica, rank) names another
 *   shard than an earlier start only when that earlier shard is no longer
 *   wanted before the pass (its replica gone, failed, the shard stopped or
 *   draining) or the same pass gives it up.
 */
export function passViolations(records: LogRecord[]): string[] {
  const problems: string[] = [];
  let previousPass = 0;
  const started = new Map<string, string>();
  let state = initialFleet();
  for (const r of records) {
    const body = r.event.body;
    if (body.case === "reconcilePass") {
      const p = body.value;
      if (Number(p.observedSeq) < previousPass) {
        problems.push(
          `pass at ${r.seq} by ${p.leaderId} observed only ${p.observedSeq}, before the previous pass at ${previousPass}`,
        );
      }
      previousPass = r.seq;
      const before = state;
      for (const c of p.commands) {
        if (c.action.case !== "start") continue;
        const s = c.action.value;
        const slot = `${s.replicaId}#${s.rank}`;
        const earlier = started.get(slot);
        if (earlier !== undefined && earlier !== s.shardId) {
          const replica = before.replicas.replicas[s.replicaId];
          const old = replica?.shards.find((x) => x.shardId === earlier);
          const wanted =
            old && old.desired === "running" && old.state !== "failed" && old.state !== "stopped";
          if (old && wanted && !releasedBy(p, s.replicaId, earlier, old.nodeId)) {
            problems.push(
              `pass at ${r.seq} by ${p.leaderId} starts ${s.shardId} in slot ${slot} while ${earlier} is still wanted (${old.state} on ${old.nodeId})`,
            );
          }
        }
        started.set(slot, s.shardId);
      }
    }
    state = evolveFleet(state, r.event, { seq: r.seq, timeMs: r.timeMs });
  }
  return problems;
}

/** True when the pass itself gives up the earlier shard (the replica failed or was removed, its node lost, or it is stopped). */
function releasedBy(p: ReconcilePass, replicaId: string, shardId: string, nodeId: string): boolean {
  for (const d of p.decisions) {
    const k = d.kind;
    if ((k.case === "replicaFailed" || k.case === "replicaRemoved") && k.value.replicaId === replicaId)
      return true;
    if (k.case === "nodeLiveness" && k.value.nodeId === nodeId && k.value.liveness === Liveness.LOST)
      return true;
  }
  return p.commands.some(
    (c) => (c.action.case === "stop" || c.action.case === "drain") && c.action.value.shardId === shardId,
  );
}
