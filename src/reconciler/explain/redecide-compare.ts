/**
 * The comparison behind `llmgw check-log --redecide`: a pass as the log
 * recorded it against the pass `decide` makes again from the same input.
 * Exact, not by outcome (unlike what-if's diff.ts): the same code on the
 * same input must give the same bytes, wording and ids included, so every
 * decision, every command, their order and the truncation flag are compared
 * field by field. Each difference names the decision (or command) by its
 * position and kind, and the first field where the two differ. Pure.
 */
import { type DescMessage, equals, type JsonValue, toJson } from "@bufbuild/protobuf";
import {
  type Command,
  CommandSchema,
  type Decision,
  DecisionSchema,
  type ReconcilePass,
} from "../../gen/llmgw/v1/events_pb.js";

export interface PassDifference {
  /** What differs: a decision or command (by position), or the pass's truncation flag. */
  what: "decision" | "command" | "truncated";
  /** Position in the pass's list (0-based); 0 for `truncated`. */
  index: number;
  /** The kind of the decision (`replicaPlaced`, …) or the command's action, as recorded (else as re-decided). */
  kind: string;
  /** The first field that differs (`replicaPlaced.shards[0].gpuIndices[1]`, `explanation`), "" when one side has none. */
  field: string;
  /** That field's value as recorded, in JSON ("(none)": the recorded pass has no such entry). */
  recorded: string;
  /** That field's value as decide gives it now, in JSON ("(none)": decide gives no such entry). */
  redecided: string;
}

const NONE = "(none)";

/** Every difference between the recorded pass and the re-decided one; [] when they are the same. */
export function comparePass(recorded: ReconcilePass, redecided: ReconcilePass): PassDifference[] {
  const out: PassDifference[] = [];
  compareLists(out, "decision", DecisionSchema, recorded.decisions, redecided.decisions, decisionKind);
  compareLists(out, "command", CommandSchema, recorded.commands, redecided.commands, commandKind);
  if (recorded.truncated !== redecided.truncated)
    out.push({
      what: "truncated",
      index: 0,
      kind: "truncated",
      field: "truncated",
      recorded: String(recorded.truncated),
      redecided: String(redecided.truncated),
    });
  return out;
}

function decisionKind(d: Decision): string {
  return d.kind.case ?? "unknown";
}

function commandKind(c: Command): string {
  return c.action.case ?? "unknown";
}

function compareLists<T extends Decision | Command>(
  out: PassDifference[],
  what: "decision" | "command",
  schema: DescMessage,
  recorded: readonly T[],
  redecided: readonly T[],
  kindOf: (m: T) => string,
): void {
  const n = Math.max(recorded.length, redecided.length);
  for (let i = 0; i < n; i++) {
    const a = recorded[i];
    const b = redecided[i];
    if (a !== undefined && b !== undefined) {
      // biome-ignore lint/suspicious/noExplicitAny: equals is generic over the schema; T is that schema's message
      if (equals(schema as any, a as any, b as any)) continue;
      const first = firstDifference(toJson(schema, a), toJson(schema, b), "");
      out.push({ what, index: i, kind: kindOf(a), ...first });
    } else if (a !== undefined) {
      out.push({ what, index: i, kind: kindOf(a), field: "", recorded: summary(schema, a), redecided: NONE });
    } else if (b !== undefined) {
      out.push({ what, index: i, kind: kindOf(b), field: "", recorded: NONE, redecided: summary(schema, b) });
    }
  }
}

function summary(schema: DescMessage, m: Decision | Command): string {
  return JSON.stringify(toJson(schema, m));
}

/** The first path (depth first, in field order) where two JSON values differ. */
export function firstDifference(
  a: JsonValue | undefined,
  b: JsonValue | undefined,
  path: string,
): { field: string; recorded: string; redecided: string } {
  const here = { field: path, recorded: show(a), redecided: show(b) };
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      if (!sameJson(a[i], b[i])) return firstDifference(a[i], b[i], `${path}[${i}]`);
    }
    return here;
  }
  if (isObject(a) && isObject(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])];
    for (const k of keys) {
      if (!sameJson(a[k], b[k])) return firstDifference(a[k], b[k], path === "" ? k : `${path}.${k}`);
    }
  }
  return here;
}

function isObject(v: JsonValue | undefined): v is { [k: string]: JsonValue } {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function sameJson(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** A field JSON leaves out holds its default (proto3): "(unset)". */
function show(v: JsonValue | undefined): string {
  return v === undefined ? "(unset)" : JSON.stringify(v);
}
