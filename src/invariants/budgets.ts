/**
 * A pass that drains ready replicas (a voluntary disruption: a node drain,
 * a rollout, a GPU-fault move) leaves each model at least its disruption
 * budget (`minAvailable`) or, with none stated, as many ready as before
 * (make-before-break) or as desired.
 *
 * "As many as before" counts slots: a replica drained for a replacement
 * that is already ready (a swap) was counted twice before the pass, once
 * through each. A ready replica the same pass records as failed or removes
 * without a drain (its agent came back without it) was lost, not taken, and
 * counts as still ready, as in `rollout-below-ready`.
 *
 * A model rolling out (before or after the pass) with no `minAvailable` is
 * left to `rollout-below-ready`: its rollout policy may take replicas down
 * before their replacements exist (maxUnavailable), and decide's drains
 * take the same floor then. A stated floor above the desired count (a
 * scale-down, an autoscaler lowering it) is the desired count: a model is
 * never asked to keep more ready than it wants.
 *
 * A pass decides on the log up to its observed sequence; a shard report or
 * a catalog change may land between that and the pass. Only where nothing
 * the judgement reads changed in between (no replica of the model changed,
 * the catalog is the one the pass saw) is the state at landing the state
 * the pass decided on, so only there is a fall below the floor the pass's
 * doing; elsewhere it is a race the next pass answers.
 */
import { type FleetState, isReady, readyCounts, resolveMinAvailable } from "../projections/index.js";
import { rollingModels } from "./rollouts.js";
import type { CheckedEvent, Violation } from "./types.js";

interface Drained {
  model: string;
  /** Drained for a replacement that was already ready (make-before-break). */
  swap: boolean;
  /** Recorded failed or removed without a drain: lost, not taken. */
  lost: boolean;
}

interface PassBefore {
  drained: Drained[];
  /** Ready and desired replicas per model before the pass. */
  counts: Record<string, { ready: number; desired: number }>;
  /** Models some replica of which changed after the pass's observed sequence, before it landed. */
  moved: Set<string>;
  /** The catalog changed after the pass's observed sequence. */
  catalogMoved: boolean;
  /** Models rolling out when the pass landed. */
  rolling: Set<string>;
}

export class DisruptionBudgetRule {
  readonly violations: Violation[] = [];
  #pass: PassBefore | undefined;

  /** Before folding `r`: what the pass drains, read from the state it found. */
  observe(r: CheckedEvent, before: FleetState): void {
    this.#pass = undefined;
    const body = r.event.body;
    if (body.case !== "reconcilePass") return;
    const replicas = before.replicas.replicas;
    const drained: Drained[] = [];
    for (const d of body.value.decisions) {
      const k = d.kind;
      if (k.case !== "replicaDrainStarted" && k.case !== "replicaFailed" && k.case !== "replicaRemoved")
        continue;
      const rep = replicas.get(k.value.replicaId);
      if (!rep || !isReady(rep)) continue;
      if (k.case !== "replicaDrainStarted") {
        drained.push({ model: rep.model, swap: false, lost: true });
        continue;
      }
      const next = rep.replacedBy ? replicas.get(rep.replacedBy) : undefined;
      drained.push({ model: rep.model, swap: next !== undefined && isReady(next), lost: false });
    }
    if (!drained.some((d) => !d.lost)) return;
    const observed = Number(body.value.observedSeq);
    const models = new Set(drained.map((d) => d.model));
    const moved = new Set<string>();
    for (const rep of replicas.values())
      if (models.has(rep.model) && rep.lastChangeSeq > observed) moved.add(rep.model);
    this.#pass = {
      drained,
      counts: readyCounts(before.replicas),
      moved,
      catalogMoved: before.replicas.catalog.seq > observed,
      rolling: rollingModels(before),
    };
  }

  /** After folding: `after` includes the pass. */
  recordAfter(r: CheckedEvent, after: FleetState): void {
    const pass = this.#pass;
    const body = r.event.body;
    if (pass === undefined || body.case !== "reconcilePass" || pass.catalogMoved) return;
    this.#pass = undefined;
    const counts = readyCounts(after.replicas);
    const rollingAfter = rollingModels(after);
    const swaps: Record<string, number> = {};
    const lost: Record<string, number> = {};
    for (const d of pass.drained) {
      if (d.lost) lost[d.model] = (lost[d.model] ?? 0) + 1;
      else swaps[d.model] = (swaps[d.model] ?? 0) + (d.swap ? 1 : 0);
    }
    for (const model of Object.keys(swaps)) {
      if (pass.moved.has(model)) continue;
      const b = pass.counts[model];
      const c = counts[model];
      if (!b || !c) continue;
      const ready = c.ready + (lost[model] ?? 0);
      if (ready >= b.ready) continue;
      const stated = after.replicas.catalog.models.find((m) => m.name === model)?.minAvailable;
      if (stated === undefined && (pass.rolling.has(model) || rollingAfter.has(model))) continue;
      const floor =
        stated === undefined
          ? Math.min(b.ready - (swaps[model] ?? 0), c.desired)
          : Math.min(resolveMinAvailable(stated, c.desired), c.desired);
      if (ready >= floor) continue;
      this.violations.push({
        rule: "below-disruption-budget",
        seq: r.seq,
        message: `the pass at ${r.seq} by ${body.value.leaderId} drained ready replicas of ${model}: ${b.ready} → ${ready} ready${lost[model] ? ` (counting ${lost[model]} it recorded as lost)` : ""}, below ${stated === undefined ? `${floor} (no minAvailable: make-before-break)` : `minAvailable ${stated} = ${floor}`}`,
      });
    }
  }
}
