/**
 * The invariant checker over the real log, for tests that end a fault
 * scenario: reads the whole stream (malformed messages included, as
 * violations) and fails with every violation listed, one per line. With
 * `redecide`, every reconcile pass must also be what decide, run again on
 * the state it observed, makes (`llmgw check-log --redecide`'s code).
 */
import assert from "node:assert/strict";
import {
  type AckedMessage,
  type CheckedEvent,
  type CheckReport,
  checkLog,
  formatViolation,
  type Violation,
} from "../../src/invariants/index.js";
import type { Log } from "../../src/log/index.js";
import { formatRedecided, reconcilerConfigSchema, redecideLog } from "../../src/reconciler/index.js";
import type { SimFleet } from "../../src/sim/index.js";

export interface LogInvariantOptions {
  /** What the agents saw acknowledged (e.g. from `recordAcks`). */
  acked?: readonly AckedMessage[];
  supersedeGraceMs?: number;
  /** Named in the failure message: which scenario produced the log. */
  what?: string;
  /** The config the log's reconcilers ran with (as their --config file holds it): re-decide every pass with it. */
  redecide?: Record<string, unknown>;
}

export async function assertLogInvariants(log: Log, opts: LogInvariantOptions = {}): Promise<CheckReport> {
  const records: Array<{
    seq: number;
    timeMs: number;
    event: import("../../src/gen/llmgw/v1/events_pb.js").Event;
  }> = [];
  const malformed: Array<{ seq: number; message: string }> = [];
  // Taken before reading: an ack recorded while the log is read may be for an
  // event stored after the read's end.
  const acked = opts.acked ? [...opts.acked] : undefined;
  for await (const r of log.read({
    onMalformed: (err, raw) => malformed.push({ seq: raw.seq, message: err.message }),
  })) {
    records.push({ seq: r.seq, timeMs: r.timeMs, event: r.event });
  }
  const readTo = records.at(-1)?.seq ?? 0;
  const streamLast = (await log.jsm.streams.info(log.stream)).state.last_seq;
  const report = checkLog(records, {
    malformed,
    ...(acked ? { acked } : {}),
    ...(opts.supersedeGraceMs === undefined ? {} : { supersedeGraceMs: opts.supersedeGraceMs }),
  });
  if (opts.redecide !== undefined) report.violations.push(...redecideViolations(records, opts.redecide));
  assert.equal(
    report.violations.length,
    0,
    `${opts.what ?? "the log"} breaks invariants (${report.events} events, ${report.passes} passes; read to seq ${readTo}, the stream's last is ${streamLast}):\n` +
      report.violations.map(formatViolation).join("\n"),
  );
  return report;
}

/** `check-log --redecide`'s verdict on `records`, with `config` as the reconciler's --config file holds it. */
function redecideViolations(records: readonly CheckedEvent[], config: Record<string, unknown>): Violation[] {
  return redecideLog(records, { config: reconcilerConfigSchema.parse(config) }).differing.map((p) => ({
    rule: "redecide",
    seq: p.seq,
    message: formatRedecided(p),
  }));
}

/**
 * Every reconcile pass of the log is what decide, run again on the state it
 * observed, makes (`llmgw check-log --redecide`); fails naming each that is not.
 */
export async function assertRedecided(
  log: Log,
  config: Record<string, unknown>,
  what = "the log",
): Promise<{ passes: number }> {
  const records: CheckedEvent[] = [];
  for await (const r of log.read()) records.push({ seq: r.seq, timeMs: r.timeMs, event: r.event });
  const passes = records.filter((r) => r.event.body.case === "reconcilePass").length;
  assert.ok(passes > 0, `${what}: no reconcile pass to re-decide`);
  const found = redecideViolations(records, config);
  assert.deepEqual(
    found.map(formatViolation),
    [],
    `${what}: passes decide makes otherwise (${passes} passes)`,
  );
  return { passes };
}

/** Collects what a simulated fleet's agents saw acknowledged, from now on. */
export function recordAcks(fleet: SimFleet): AckedMessage[] {
  const acked: AckedMessage[] = [];
  fleet.on((e) => {
    if (e.type === "acked") acked.push({ nodeId: e.nodeId, sessionId: e.sessionId, messageId: e.messageId });
  });
  return acked;
}
