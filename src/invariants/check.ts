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
import { DisruptionBudgetRule } from "./budgets.js";
import { determinismViolations } from "./determinism.js";
import { EndpointRule } from "./endpoints.js";
import { FailureReasonRule } from "./failure-reasons.js";
import { FencingRule } from "./fencing.js";
import { GpuPlacementRule } from "./gpus.js";
import { LeaseOrderRule } from "./leases.js";
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

/**
 * The checker's rules over a log read one event at a time: `checkLog` runs
 * it over a whole log, `llmgw simulate` after every batch of a run, so a
 * violation is caught at the step that made it. What needs the whole log
 * (acked messages each stored once, replay determinism) is in `finish`.
 */
export class LogChecker {
  readonly #slots = new SlotRule();
  readonly #fencing = new FencingRule();
  readonly #sessions: SessionRule;
  readonly #stored = new StoredRule();
  readonly #gpus = new GpuPlacementRule();
  readonly #undeliverable = new UndeliverableRule();
  readonly #failureReasons = new FailureReasonRule();
  readonly #endpoints = new EndpointRule();
  readonly #rollouts = new RolloutReadyRule();
  readonly #results = new ResultAddressRule();
  readonly #budgets = new DisruptionBudgetRule();
  readonly #leases = new LeaseOrderRule();
  #state: FleetState = initialFleet();
  readonly #order: Violation[] = [];
  #previousSeq = 0;
  passes = 0;
  opened = 0;

  constructor(supersedeGraceMs = DEFAULT_SUPERSEDE_GRACE_MS) {
    this.#sessions = new SessionRule(supersedeGraceMs);
  }

  /** The fleet as folded so far (read-only for callers). */
  get state(): FleetState {
    return this.#state;
  }

  observe(r: CheckedEvent): void {
    if (r.seq <= this.#previousSeq) {
      this.#order.push({
        rule: "replay-determinism",
        seq: r.seq,
        message: `sequence ${r.seq} follows ${this.#previousSeq}: the log given is not in order`,
      });
    }
    this.#previousSeq = r.seq;
    const b = r.event.body.case;
    if (b === "reconcilePass") this.passes++;
    else if (b === "sessionOpened") this.opened++;
    const state = this.#state;
    this.#stored.observe(r);
    this.#fencing.observe(r);
    this.#slots.observe(r, state);
    this.#failureReasons.observe(r, state);
    this.#sessions.observe(r);
    this.#gpus.observe(r);
    this.#undeliverable.observe(r);
    this.#rollouts.observe(r, state);
    this.#budgets.observe(r, state);
    this.#leases.observe(r);
    this.#state = evolveFleet(state, r.event, { seq: r.seq, timeMs: r.timeMs });
    this.#sessions.recordAfter(r, this.#state);
    this.#endpoints.recordAfter(r, this.#state);
    this.#gpus.recordAfter(r, this.#state);
    this.#rollouts.recordAfter(r, this.#state);
    this.#results.recordAfter(r, this.#state);
    this.#budgets.recordAfter(r, this.#state);
  }

  /** How many violations the events so far showed (cheap: for a check after every batch). */
  get violationCount(): number {
    return (
      this.#order.length +
      this.#slots.violations.length +
      this.#sessions.violations.length +
      this.#fencing.violations.length +
      this.#gpus.violations.length +
      this.#undeliverable.violations.length +
      this.#failureReasons.violations.length +
      this.#endpoints.violations.length +
      this.#rollouts.violations.length +
      this.#results.violations.length +
      this.#budgets.violations.length +
      this.#leases.violations.length
    );
  }

  /** The violations the events so far showed, in log order. */
  violations(): Violation[] {
    return [
      ...this.#order,
      ...this.#slots.violations,
      ...this.#sessions.violations,
      ...this.#fencing.violations,
      ...this.#gpus.violations,
      ...this.#undeliverable.violations,
      ...this.#failureReasons.violations,
      ...this.#endpoints.violations,
      ...this.#rollouts.violations,
      ...this.#results.violations,
      ...this.#budgets.violations,
      ...this.#leases.violations,
    ].sort((x, y) => x.seq - y.seq);
  }

  /** Every violation, with those only the whole log shows: acked messages not stored once, replay determinism. */
  finish(records: readonly CheckedEvent[], opts: CheckOptions = {}): Violation[] {
    const every = opts.checkpointEvery ?? Math.max(500, Math.ceil(records.length / 20));
    return [
      ...this.violations(),
      ...this.#stored.finish(opts.acked ?? []),
      ...determinismViolations(records, opts.projection ?? (fleetProjection as Projection<unknown>), every),
    ].sort((x, y) => x.seq - y.seq);
  }
}

export function checkLog(records: readonly CheckedEvent[], opts: CheckOptions = {}): CheckReport {
  const checker = new LogChecker(opts.supersedeGraceMs ?? DEFAULT_SUPERSEDE_GRACE_MS);
  const total = records.length;
  for (let i = 0; i < total; i++) {
    checker.observe(records[i]!);
    if (opts.onProgress && (i + 1) % 5000 === 0) opts.onProgress(i + 1, total);
  }
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
    ...checker.finish(records, opts),
  ].sort((x, y) => x.seq - y.seq);
  opts.onProgress?.(total, total);
  return {
    events: total,
    firstSeq: records[0]?.seq ?? 0,
    lastSeq: records.at(-1)?.seq ?? 0,
    passes: checker.passes,
    sessions: checker.opened,
    acked: opts.acked?.length ?? 0,
    violations,
  };
}
