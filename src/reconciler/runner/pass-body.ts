/**
 * What the runner hands `decide` and what it records of the answer, as pure
 * functions: the pass loop (runner.ts) calls them with what it observed, and
 * `llmgw check-log --redecide` (reconciler/explain/redecide.ts) calls them
 * with what the pass recorded, so the check re-runs the exact input the
 * runner built and compares the exact body it wrote.
 */
import { create } from "@bufbuild/protobuf";
import { type ReconcilePass, ReconcilePassSchema } from "../../gen/llmgw/v1/events_pb.js";
import type { FleetState } from "../../projections/index.js";
import type { DecideInputOf, DecideResult } from "./contract.js";

/** What a pass knew besides the state: recorded in its body (the live gateways are not). */
export interface PassFacts {
  leaderId: string;
  leaseRevision: number;
  /** The last log sequence folded into the state decide was given. */
  observedSeq: number;
  nowMs: number;
  trigger: string;
}

export function decideInput<C>(
  state: FleetState,
  config: C,
  nowMs: number,
  liveGateways: ReadonlySet<string>,
): DecideInputOf<C> {
  return { state, config, nowMs, liveGateways };
}

/** The ReconcilePass the runner appends for `out`. */
export function passBody(out: DecideResult, facts: PassFacts): ReconcilePass {
  return create(ReconcilePassSchema, {
    leaderId: facts.leaderId,
    leaseRevision: BigInt(facts.leaseRevision),
    observedSeq: BigInt(facts.observedSeq),
    nowUnixMs: BigInt(facts.nowMs),
    decisions: out.decisions,
    commands: out.commands,
    truncated: out.truncated,
    trigger: facts.trigger,
  });
}
