/**
 * During a rollout, no pass lowers a model's ready replicas below
 * `desired − maxUnavailable` (its catalog policy): a rollout replaces
 * make-before-break. Only passes take replicas out of service (a drain or
 * stop starts there); a replica that crashes on its own lowers readiness
 * in a shard report, which is no pass's doing. So the rule compares each
 * pass with the state it found: ready fell, below the floor, for a model
 * rolling before or after the pass.
 */
import { type FleetState, readyCounts } from "../projections/index.js";
import type { CheckedEvent, Violation } from "./types.js";

export class RolloutReadyRule {
  readonly violations: Violation[] = [];
  #before: Record<string, number> = {};
  #rolling = new Set<string>();

  /** Before folding `r`. */
  observe(r: CheckedEvent, before: FleetState): void {
    if (r.event.body.case !== "reconcilePass") return;
    this.#before = {};
    for (const [model, c] of Object.entries(readyCounts(before.replicas))) this.#before[model] = c.ready;
    this.#rolling = rollingModels(before);
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
      const now = counts[model]?.ready ?? 0;
      if (now >= was || now >= floor) continue;
      this.violations.push({
        rule: "rollout-below-ready",
        seq: r.seq,
        message: `the pass at ${r.seq} by ${body.value.leaderId} took ${model} from ${was} to ${now} ready replicas during its rollout, below ${m.replicas} desired − ${m.rollout.maxUnavailable} maxUnavailable = ${floor}`,
      });
    }
  }
}

function rollingModels(s: FleetState): Set<string> {
  return new Set(
    Object.values(s.replicas.rollouts)
      .filter((x) => x.active)
      .map((x) => x.model),
  );
}
