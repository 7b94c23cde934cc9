/**
 * No replica is placed on a GPU placement must leave alone: one with a
 * problem (registered, or reported by a heartbeat), a cordoned one, or any
 * GPU of a node with node-level problems. A pass decides on the log up to
 * its observed sequence, and facts of other subjects may land between that
 * and the pass: so a placement breaks the rule only when the GPU was
 * already unavailable at the observed sequence and still is when the pass
 * lands.
 */
import type { FleetState, NodeState } from "../projections/index.js";
import type { CheckedEvent, Violation } from "./types.js";

export class GpuPlacementRule {
  /** `<node>\0<gpu>` → the sequence since which the GPU has been unavailable, and why. */
  readonly #since = new Map<string, { seq: number; why: string }>();
  readonly violations: Violation[] = [];

  /** Called before the event is folded. */
  observe(r: CheckedEvent): void {
    const body = r.event.body;
    if (body.case !== "reconcilePass") return;
    const observed = Number(body.value.observedSeq);
    for (const d of body.value.decisions) {
      if (d.kind.case !== "replicaPlaced") continue;
      const p = d.kind.value;
      for (const s of p.shards) {
        for (const g of s.gpuIndices) {
          const u = this.#since.get(key(s.nodeId, g));
          if (u === undefined || u.seq > observed) continue;
          this.violations.push({
            rule: "placed-on-unavailable-gpu",
            seq: r.seq,
            message: `pass at ${r.seq} places ${p.replicaId} on GPU ${g} of ${s.nodeId}, unavailable since ${u.seq} (${u.why}); the pass observed ${observed}`,
          });
        }
      }
    }
  }

  /** Called after the event is folded: tracks when each GPU of the node it names became unavailable. */
  recordAfter(r: CheckedEvent, after: FleetState): void {
    const b = r.event.body;
    switch (b.case) {
      case "sessionOpened":
      case "hardwareChanged":
      case "usageChanged":
      case "gpuProblemsCleared":
      case "gpuCordoned":
      case "gpuUncordoned": {
        const n = after.inventory.nodes.get(b.value.nodeId);
        if (n) this.#track(n, r.seq);
        return;
      }
      default:
        return;
    }
  }

  #track(n: NodeState, seq: number): void {
    const present = new Set<number>();
    for (const g of n.gpus) {
      present.add(g.index);
      const why =
        n.nodeProblems.length > 0
          ? "node-level problem"
          : g.problems.length > 0 || g.faults.length > 0
            ? "problem"
            : g.cordoned
              ? "cordoned"
              : "";
      const k = key(n.nodeId, g.index);
      if (why === "") this.#since.delete(k);
      else if (!this.#since.has(k)) this.#since.set(k, { seq, why });
    }
    // A GPU gone from the registration is not placed on at all (placement uses only listed GPUs).
    for (const k of this.#since.keys()) {
      const [node, gpu] = k.split("\u0000");
      if (node === n.nodeId && !present.has(Number(gpu))) this.#since.delete(k);
    }
  }
}

function key(nodeId: string, gpu: number): string {
  return `${nodeId}\u0000${gpu}`;
}
