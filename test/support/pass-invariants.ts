/**
 * Checks over a whole log that the reconciler's passes kept the invariants
 * a leader change must not break (invariants 1 and 4 of docs/ARCHITECTURE.md), with the rules of
 * the invariant checker (`src/invariants`, `llmgw check-log`).
 */
import type { ReconcilePass } from "../../src/gen/llmgw/v1/events_pb.js";
import { checkLog, type RuleName } from "../../src/invariants/index.js";
import type { LogRecord } from "../../src/log/index.js";

export interface PassRecord {
  seq: number;
  pass: ReconcilePass;
}

export function passesOf(records: LogRecord[]): PassRecord[] {
  const out: PassRecord[] = [];
  for (const r of records)
    if (r.event.body.case === "reconcilePass") out.push({ seq: r.seq, pass: r.event.body.value });
  return out;
}

const PASS_RULES: ReadonlySet<RuleName> = new Set(["fencing", "slot-started-twice"]);

/**
 * Returns every violation of fencing (no two passes from one log position)
 * and of "no shard slot started twice" found in the log (empty when none).
 */
export function passViolations(records: LogRecord[]): string[] {
  return checkLog(records)
    .violations.filter((v) => PASS_RULES.has(v.rule))
    .map((v) => v.message);
}
