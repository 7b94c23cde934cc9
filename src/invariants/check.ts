/**
 * The invariant checker: one pass over a decoded log (plus two folds for
 * replay determinism) that reports every violation of the invariants (docs/ARCHITECTURE.md) it can see
 * in the log, each naming the sequence and what broke. Pure: the log is an
 * input, nothing is read or timed here.
 */
import {
  evolveFleet,
  type FleetState,
  fleetProjection,
  initialFleet,
  type Projection,
} from "../projections/index.js";
import { determinismViolations } from "./determinism.js";
import { EndpointRule } from "./endpoints.js";
import { FailureReasonRule } from "./failure-reasons.js";
import { FencingRule } from "./fencing.js";
import { GpuPlacementRule } from "./gpus.js";
import { ResultAddressRule } from "./results.js";
import { RolloutReadyRule } from "./rollouts.js";
import { SessionRule } from "./sessions.js";
import { SlotRule } from "./slots.js";
import { StoredRule } from "./stored.js";
import type { AckedMessage, CheckedEvent, Violation } from "./types.js";
import { UndeliverableRule } from "./undeliverable.js";

export interface CheckOptions {
  /** Messages the agents saw acknowledged (their own record); each must be in the log once. */
  acked?: readonly AckedMessage[];
  /** How long a superseded session may still write events after the newer one was stored (default 10 s). */
  supersedeGraceMs?: number;
  /** The projection whose replay must be deterministic (default: the fleet). */
  projection?: Projection<unknown>;
  /** Compare the two determinism folds every this many events (default: about 20 checkpoints). */
  checkpointEvery?: number;
  /** Messages of the log that did not decode (invariant 6: nothing malformed is ever written). */
  malformed?: ReadonlyArray<{ seq: number; message: string }>;
  /**
   * Events the reader refused because their subject may not carry their
   * kind (src/log/subject-kinds.ts): never folded, each one a violation.
   */
  refused?: ReadonlyArray<{ seq: number; subject: string; kind: string; reason: string }>;
  /** Called as events are checked (done of total), for a progress line. */
  onProgress?: (done: number, total: number) => void;
}

export interface CheckReport {
  events: number;
  firstSeq: number;
  lastSeq: number;
  passes: number;
  sessions: number;
  acked: number;
  violations: Violation[];
}

export const DEFAULT_SUPERSEDE_GRACE_MS = 10_000;

export function checkLog(records: readonly CheckedEvent[], opts: CheckOptions = {}): CheckReport {
  const slots = new SlotRule();
  const fencing = new FencingRule();
  const sessions = new SessionRule(opts.supersedeGraceMs ?? DEFAULT_SUPERSEDE_GRACE_MS);
  const stored = new StoredRule();
  const gpus = new GpuPlacementRule();
  const undeliverable = new UndeliverableRule();
  const failureReasons = new FailureReasonRule();
  const endpoints = new EndpointRule();
  const rollouts = new RolloutReadyRule();
  const results = new ResultAddressRule();
  let state: FleetState = initialFleet();
  let passes = 0;
  let opened = 0;
  let previousSeq = 0;
  const order: Violation[] = [];
  const total = records.length;
  for (let i = 0; i < total; i++) {
    const r = records[i]!;
    if (r.seq <= previousSeq) {
      order.push({
        rule: "replay-determinism",
        seq: r.seq,
        message: `sequence ${r.seq} follows ${previousSeq}: the log given is not in order`,
      });
    }
    previousSeq = r.seq;
    const b = r.event.body.case;
    if (b === "reconcilePass") passes++;
    else if (b === "sessionOpened") opened++;
    stored.observe(r);
    fencing.observe(r);
    slots.observe(r, state);
    failureReasons.observe(r, state);
    sessions.observe(r);
    gpus.observe(r);
    undeliverable.observe(r);
    rollouts.observe(r, state);
    state = evolveFleet(state, r.event, { seq: r.seq, timeMs: r.timeMs });
    sessions.recordAfter(r, state);
    endpoints.recordAfter(r, state);
    gpus.recordAfter(r, state);
    rollouts.recordAfter(r, state);
    results.recordAfter(r, state);
    if (opts.onProgress && (i + 1) % 5000 === 0) opts.onProgress(i + 1, total);
  }
  const every = opts.checkpointEvery ?? Math.max(500, Math.ceil(total / 20));
  const violations = [
    ...(opts.malformed ?? []).map(
      (m): Violation => ({
        rule: "malformed-event",
        seq: m.seq,
        message: `message at ${m.seq} is not an event: ${m.message}`,
      }),
    ),
    ...(opts.refused ?? []).map(
      (r): Violation => ({
        rule: "subject-kind",
        seq: r.seq,
        message: `${r.kind} at ${r.seq} on subject ${r.subject} was refused, not folded: ${r.reason}`,
      }),
    ),
    ...order,
    ...slots.violations,
    ...sessions.violations,
    ...fencing.violations,
    ...gpus.violations,
    ...undeliverable.violations,
    ...failureReasons.violations,
    ...endpoints.violations,
    ...rollouts.violations,
    ...results.violations,
    ...stored.finish(opts.acked ?? []),
    ...determinismViolations(records, opts.projection ?? (fleetProjection as Projection<unknown>), every),
  ].sort((x, y) => x.seq - y.seq);
  opts.onProgress?.(total, total);
  return {
    events: total,
    firstSeq: records[0]?.seq ?? 0,
    lastSeq: records.at(-1)?.seq ?? 0,
    passes,
    sessions: opened,
    acked: opts.acked?.length ?? 0,
    violations,
  };
}
