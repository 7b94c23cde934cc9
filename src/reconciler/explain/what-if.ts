/**
 * What-if over recorded history: at every reconcile pass in a range, run
 * decide again, with another config, on the state that pass decided on (its
 * observed sequence), and compare outcomes. The recorded history is kept
 * (each pass is compared on its own) and nothing is written. The log is read
 * through the function given, so this file does no I/O of its own; the CLI
 * (`llmgw what-if`) and the API (`POST /v1/what-if`) share it.
 */
import type { Decision, Event, ReconcilePass } from "../../gen/llmgw/v1/events_pb.js";
import { type FleetState, fleetProjection } from "../../projections/index.js";
import type { ReconcilerConfig } from "../decide/config.js";
import { decide } from "../decide/decide.js";
import { type Difference, diffDecisions } from "./diff.js";
import type { RecordedPass } from "./select.js";

/** What the reader yields: a stored event with its sequence and time. */
export interface WhatIfRecord {
  seq: number;
  timeMs: number;
  event: Event;
}

export interface WhatIfReader {
  /** Reconcile passes only, from `fromSeq` up to `untilSeq` (inclusive; undefined: the end). */
  passes(fromSeq: number, untilSeq: number | undefined): AsyncIterable<RecordedPass>;
  /** Every event from the start up to `untilSeq`. */
  all(untilSeq: number): AsyncIterable<WhatIfRecord>;
}

export interface WhatIfPass {
  seq: number;
  nowMs: number;
  differences: Difference[];
}

export interface WhatIfResult {
  config: ReconcilerConfig;
  /** Passes compared. */
  compared: number;
  /** Every pass compared, in log order (most with no differences). */
  passes: WhatIfPass[];
}

/**
 * The sequence of the state a pass at `seq` decided on: its observed
 * sequence; an older writer without one decided on what came before it.
 */
export function decidedOnSeq(seq: number, pass: ReconcilePass): number {
  const observed = Number(pass.observedSeq);
  return observed > 0 && observed < seq ? observed : seq - 1;
}

/** Gateways whose lease the recorded state counts as live (what decide is given). */
export function liveGatewaysOf(state: FleetState): Set<string> {
  return new Set(
    Object.values(state.inventory.gateways)
      .filter((g) => g.status === "running" || g.status === "draining")
      .map((g) => g.gatewayId),
  );
}

export async function runWhatIf(
  reader: WhatIfReader,
  config: ReconcilerConfig,
  range: { fromSeq?: number; toSeq?: number } = {},
): Promise<WhatIfResult> {
  const passes: Array<{ seq: number; target: number; nowMs: number }> = [];
  for await (const r of reader.passes(range.fromSeq ?? 1, range.toSeq)) {
    passes.push({ seq: r.seq, target: decidedOnSeq(r.seq, r.pass), nowMs: Number(r.pass.nowUnixMs) });
  }
  const results: WhatIfPass[] = [];
  const last = passes.at(-1)?.seq;
  if (last === undefined) return { config, compared: 0, passes: results };

  const due = [...passes].sort((a, b) => a.target - b.target || a.seq - b.seq);
  const alternatives = new Map<number, Decision[]>();
  let state = fleetProjection.initialState();
  let next = 0;
  const decideUpTo = (seq: number) => {
    for (; next < due.length && (due[next] as (typeof due)[number]).target <= seq; next++) {
      const p = due[next] as (typeof due)[number];
      const out = decide({ state, config, nowMs: p.nowMs, liveGateways: liveGatewaysOf(state) });
      alternatives.set(p.seq, out.decisions);
    }
  };
  decideUpTo(0);
  for await (const r of reader.all(last)) {
    decideUpTo(r.seq - 1);
    const alt = alternatives.get(r.seq);
    if (alt && r.event.body.case === "reconcilePass") {
      results.push({
        seq: r.seq,
        nowMs: Number(r.event.body.value.nowUnixMs),
        differences: diffDecisions(r.event.body.value.decisions, alt),
      });
      alternatives.delete(r.seq);
    }
    state = fleetProjection.evolve(state, r.event, { seq: r.seq, timeMs: r.timeMs });
    decideUpTo(r.seq);
  }
  return { config, compared: results.length, passes: results };
}
