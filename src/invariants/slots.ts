/**
 * Invariant 1, no shard slot started twice: a StartShard for (replica, rank)
 * may name another shard than an earlier start only when that earlier shard
 * is no longer wanted in the state the pass was folded onto (its replica gone
 * or failed, the shard stopped or failed or given up) or the same pass gives
 * it up. Re-issues of the same shard keep its id and are not a second start.
 */
import { Liveness, type ReconcilePass } from "../gen/llmgw/v1/events_pb.js";
import type { FleetState } from "../projections/index.js";
import type { CheckedEvent, Violation } from "./types.js";

export class SlotRule {
  readonly #started = new Map<string, string>();
  readonly violations: Violation[] = [];

  /** Called before the event is folded: `before` is the state the pass lands on. */
  observe(r: CheckedEvent, before: FleetState): void {
    const body = r.event.body;
    if (body.case !== "reconcilePass") return;
    const p = body.value;
    for (const c of p.commands) {
      if (c.action.case !== "start") continue;
      const s = c.action.value;
      const slot = `${s.replicaId}#${s.rank}`;
      const earlier = this.#started.get(slot);
      if (earlier !== undefined && earlier !== s.shardId) {
        const old = before.replicas.replicas.get(s.replicaId)?.shards.find((x) => x.shardId === earlier);
        const wanted =
          old !== undefined && old.desired === "running" && old.state !== "failed" && old.state !== "stopped";
        if (old && wanted && !releasedBy(p, s.replicaId, earlier, old.nodeId)) {
          this.violations.push({
            rule: "slot-started-twice",
            seq: r.seq,
            message: `pass at ${r.seq} by ${p.leaderId} starts ${s.shardId} in slot ${slot} on ${c.nodeId} while ${earlier} is still wanted there (${old.state} on ${old.nodeId})`,
          });
        }
      }
      this.#started.set(slot, s.shardId);
    }
  }
}

/** True when the pass itself gives up the earlier shard (its replica failed or removed, its node lost, or it is stopped). */
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
