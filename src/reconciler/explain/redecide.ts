/**
 * `llmgw check-log --redecide`: for every reconcile pass in a log, run the
 * real `decide` again on the fleet folded (with the real fold) up to the
 * sequence the pass observed, with the time the pass recorded, building
 * decide's input and the pass body through the runner's own functions
 * (runner/pass-body.ts), and compare the result with what the pass
 * recorded (redecide-compare.ts). A pass that differs was not made by this
 * code from this log: a nondeterminism in decide or the fold, a writer
 * other than the runner, another config, or another version's code.
 *
 * Decide's ids come from the state's sequence and counters, and its time
 * from the pass, so the only inputs the log does not hold are listed in
 * NOT_REDERIVED. Pure: the log is an input, in order.
 */
import type { Event, ReconcilePass } from "../../gen/llmgw/v1/events_pb.js";
import { type FleetState, fleetProjection } from "../../projections/index.js";
import type { ReconcilerConfig } from "../decide/config.js";
import { decide } from "../decide/decide.js";
import { decideInput, type PassFacts, passBody } from "../runner/pass-body.js";
import { comparePass, type PassDifference } from "./redecide-compare.js";
import { decidedOnSeq, liveGatewaysOf } from "./what-if.js";

/** A stored event with its sequence and stream time, in log order. */
export interface RedecideRecord {
  seq: number;
  timeMs: number;
  event: Event;
}

export interface RedecideOptions {
  /** The config the reconciler ran with: the log does not record it. */
  config: ReconcilerConfig;
  /** Called as events are folded (done of total), for a progress line. */
  onProgress?: (done: number, total: number) => void;
}

export interface RedecidedPass {
  /** The pass's log sequence. */
  seq: number;
  eventId: string;
  leaderId: string;
  /** The sequence of the state it was re-decided on. */
  observedSeq: number;
  differences: PassDifference[];
}

export interface RedecideReport {
  /** Passes re-decided. */
  passes: number;
  /** Those whose re-decided body differs from the recorded one, in log order. */
  differing: RedecidedPass[];
}

/**
 * What decide reads that the log does not record, and how the check stands
 * in for it: a difference can come from these rather than from the code.
 */
export const NOT_REDERIVED: readonly string[] = [
  "the reconciler config (its --config file): taken from --config, the defaults without it; maxPassBytes lowered to the NATS server's max_payload as the runner lowers it (read through the API, as configured)",
  "the live-gateway set (the gateways' KV leases): the gateways the folded state counts running or draining, less those the pass itself expired for a lost lease",
];

/** The gateways whose lease the pass found gone: it expired their sessions. */
function lostGatewaysOf(pass: ReconcilePass): Set<string> {
  const lost = new Set<string>();
  for (const d of pass.decisions)
    if (d.kind.case === "sessionsExpired" && d.kind.value.gatewayId !== "") lost.add(d.kind.value.gatewayId);
  return lost;
}

/** The live set the pass decided with, as far as the log tells it (NOT_REDERIVED). */
export function liveGatewaysFor(state: FleetState, pass: ReconcilePass): Set<string> {
  const live = liveGatewaysOf(state);
  for (const g of lostGatewaysOf(pass)) live.delete(g);
  return live;
}

/** What the pass recorded of its inputs besides the state. */
function factsOf(pass: ReconcilePass): PassFacts {
  return {
    leaderId: pass.leaderId,
    leaseRevision: Number(pass.leaseRevision),
    observedSeq: Number(pass.observedSeq),
    nowMs: Number(pass.nowUnixMs),
    trigger: pass.trigger,
  };
}

/** Re-runs decide for one pass on `state` (folded to the pass's observed sequence) and compares. */
export function redecidePass(
  state: FleetState,
  pass: ReconcilePass,
  config: ReconcilerConfig,
): PassDifference[] {
  const facts = factsOf(pass);
  const out = decide(decideInput(state, config, facts.nowMs, liveGatewaysFor(state, pass)));
  return comparePass(pass, passBody(out, facts));
}

export function redecideLog(records: readonly RedecideRecord[], opts: RedecideOptions): RedecideReport {
  // Each pass with the sequence of the state it decided on.
  const due: Array<{ index: number; target: number }> = [];
  for (let i = 0; i < records.length; i++) {
    const r = records[i]!;
    if (r.event.body.case === "reconcilePass")
      due.push({ index: i, target: decidedOnSeq(r.seq, r.event.body.value) });
  }
  due.sort((a, b) => a.target - b.target || a.index - b.index);

  const found = new Map<number, RedecidedPass>();
  let state = fleetProjection.initialState();
  let next = 0;
  // Every pass whose observed sequence lies before `seq`: the state folded so far is the one it saw.
  const decideBefore = (seq: number) => {
    for (; next < due.length && due[next]!.target < seq; next++) {
      const { index, target } = due[next]!;
      const r = records[index]!;
      if (r.event.body.case !== "reconcilePass") continue;
      const pass = r.event.body.value;
      const differences = redecidePass(state, pass, opts.config);
      if (differences.length > 0)
        found.set(index, {
          seq: r.seq,
          eventId: r.event.id,
          leaderId: pass.leaderId,
          observedSeq: target,
          differences,
        });
    }
  };
  const total = records.length;
  for (let i = 0; i < total; i++) {
    const r = records[i]!;
    decideBefore(r.seq);
    state = fleetProjection.evolve(state, r.event, { seq: r.seq, timeMs: r.timeMs });
    opts.onProgress?.(i + 1, total);
  }
  decideBefore(Number.POSITIVE_INFINITY);
  const differing = [...found.entries()].sort((a, b) => a[0] - b[0]).map(([, p]) => p);
  return { passes: due.length, differing };
}

/** One line for people: the pass, then the first difference and how many more. */
export function formatRedecided(p: RedecidedPass): string {
  const d = p.differences[0]!;
  const which =
    d.what === "truncated"
      ? "its truncated flag differs"
      : `${d.what} ${d.index + 1} (${d.kind}) differs${d.field === "" ? "" : ` at ${d.field}`}`;
  const more = p.differences.length - 1;
  return (
    `pass ${p.eventId} by ${p.leaderId === "" ? "(no leader id)" : p.leaderId} on the state at seq ${p.observedSeq}: ` +
    `${which}: recorded ${d.recorded}, re-decided ${d.redecided}` +
    (more > 0 ? `; ${more} more difference${more === 1 ? "" : "s"}` : "")
  );
}
