/**
 * No endpoint is published for a replica that is not ready: after every
 * pass, each replica the routing table lists exists, is neither draining
 * nor failed back to pending, no shard of it is asked to stop or drain
 * (all of which only passes decide), and every shard reports running. A
 * shard whose report changed after the state the pass decided on (its
 * observed sequence) is a race the next pass settles, not a violation.
 * A replica whose drain starts in a pass must already be out of that
 * pass's table: the router learns of the drain before the agent does.
 */
import type { FleetState } from "../projections/index.js";
import type { CheckedEvent, Violation } from "./types.js";

export class EndpointRule {
  readonly violations: Violation[] = [];

  /** After folding: `after` includes the pass. */
  recordAfter(r: CheckedEvent, after: FleetState): void {
    const body = r.event.body;
    if (body.case !== "reconcilePass") return;
    const p = body.value;
    const observed = Number(p.observedSeq);
    const draining = new Set<string>();
    for (const d of p.decisions)
      if (d.kind.case === "replicaDrainStarted") draining.add(d.kind.value.replicaId);
    for (const [model, list] of Object.entries(after.replicas.endpoints)) {
      for (const e of list) {
        const why = draining.has(e.replicaId)
          ? "its drain starts in this very pass"
          : notReady(after, e.replicaId, observed);
        if (why === null) continue;
        this.violations.push({
          rule: "endpoint-not-ready",
          seq: r.seq,
          message: `after the pass at ${r.seq} by ${p.leaderId} the routing table of ${model} lists ${e.replicaId} (${e.url}), which is not ready: ${why}`,
        });
      }
    }
  }
}

function notReady(state: FleetState, replicaId: string, observed: number): string | null {
  const r = state.replicas.replicas.get(replicaId);
  if (!r) return "it no longer exists";
  if (r.phase === "draining") return "it is draining";
  if (r.phase === "pending" || r.shards.length === 0) return "it has no shards placed";
  const leaving = r.shards.find((s) => s.desired !== "running");
  if (leaving) return `shard ${leaving.shardId} is asked to be ${leaving.desired}`;
  const down = r.shards.find((s) => s.state !== "running" && s.lastChangeSeq <= observed);
  if (down) return `shard ${down.shardId} is ${down.state} (reported at ${down.lastChangeSeq})`;
  return null;
}
