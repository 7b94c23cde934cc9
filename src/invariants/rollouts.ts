/**
 * During a rollout, no pass lowers a model's ready replicas below
 * `desired − maxUnavailable` (its catalog policy): a rollout replaces
 * make-before-break. Only passes take replicas out of service (a drain or
 * stop starts there); a replica that crashes on its own lowers readiness
 * in a shard report, which is no pass's doing. So the rule compares each
 * pass with the state it found: ready fell, below the floor, for a model
 * rolling before or after the pass.
 *
 * A pass also records faults it did not cause: a ready replica it marks
 * failed (ReplicaFailed: an agent that came back running nothing, a node
 * expired) or removes outright (ReplicaRemoved: the agent came back without
 * it and a replacement holds its slot) was lost, not taken. No rule takes a
 * ready replica away on purpose but by draining it first (a removal
 * otherwise follows a drain, or concerns a replica that never served), so
 * those are counted as still ready, and only what the pass took on purpose
 * (drains) counts against the floor.
 */
import { type FleetState, isReady, readyCounts } from "../projections/index.js";
import type { CheckedEvent, Violation } from "./types.js";

export class RolloutReadyRule {
  readonly violations: Violation[] = [];
  #before: Record<string, number> = {};
  #rolling = new Set<string>();
  /** Per model, ready replicas the pass records as failed or removes outright: lost, not taken. */
  #lost: Record<string, number> = {};

  /** Before folding `r`. */
  observe(r: CheckedEvent, before: FleetState): void {
    if (r.event.body.case !== "reconcilePass") return;
    this.#before = {};
    for (const [model, c] of Object.entries(readyCounts(before.replicas))) this.#before[model] = c.ready;
    this.#rolling = rollingModels(before);
    this.#lost = {};
    for (const d of r.event.body.value.decisions) {
      if (d.kind.case !== "replicaFailed" && d.kind.case !== "replicaRemoved") continue;
      const rep = before.replicas.replicas.get(d.kind.value.replicaId);
      if (rep && isReady(rep)) this.#lost[rep.model] = (this.#lost[rep.model] ?? 0) + 1;
    }
  }

  /** After folding: `after` includes the pass. */
  recordAfter(r: CheckedEvent, after: FleetState): void {
    const body = r.event.body;
    if (body.case !== "reconcilePass") return;
    const counts = readyCounts(after.replicas);
    for (const model of new Set([...this.#rolling, ...rollingModels(after)])) {
      const m = after.replicas.catalog.models.find((x) => x.name === model);
      if (!m) continue;
      const floor = m.replicas - m.rollout.maxUnavailable;
      const was = this.#before[model] ?? 0;
      const now = (counts[model]?.ready ?? 0) + (this.#lost[model] ?? 0);
      if (now >= was || now >= floor) continue;
      this.violations.push({
        rule: "rollout-below-ready",
        seq: r.seq,
        message: `the pass at ${r.seq} by ${body.value.leaderId} took ${model} from ${was} to ${now} ready replicas during its rollout${this.#lost[model] ? ` (not counting ${this.#lost[model]} it recorded as lost)` : ""}, below ${m.replicas} desired − ${m.rollout.maxUnavailable} maxUnavailable = ${floor}`,
      });
    }
  }
}

/** Models with a rollout in progress. */
export function rollingModels(s: FleetState): Set<string> {
  return new Set(
    Object.values(s.replicas.rollouts)
      .filter((x) => x.active)
      .map((x) => x.model),
  );
}
