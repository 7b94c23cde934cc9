/**
 * Invariant 5, replay determinism: folding the same log twice, from fresh
 * initial states and from independent copies of the events, gives
 * byte-identical serialized state. States are compared at checkpoints so a
 * difference is located: the first event after which the two folds differ.
 * A checkpoint compares the states as their canonical JSON would
 * (`canonicallyEqual`) without writing it; the text is written once a
 * checkpoint differs, to find and show the difference.
 */
import { clone } from "@bufbuild/protobuf";
import { EventSchema } from "../gen/llmgw/v1/events_pb.js";
import { canonicalJson, canonicallyEqual, type Projection } from "../projections/index.js";
import type { CheckedEvent, Violation } from "./types.js";

export function determinismViolations<S>(
  records: readonly CheckedEvent[],
  projection: Projection<S>,
  every: number,
): Violation[] {
  const copies = records.map((r) => ({ ...r, event: clone(EventSchema, r.event) }));
  let a = projection.initialState();
  let b = projection.initialState();
  let lastEqual = 0;
  for (let i = 0; i < records.length; i++) {
    const r = records[i]!;
    const c = copies[i]!;
    a = projection.evolve(a, r.event, { seq: r.seq, timeMs: r.timeMs });
    b = projection.evolve(b, c.event, { seq: c.seq, timeMs: c.timeMs });
    const checkpoint = (i + 1) % every === 0 || i === records.length - 1;
    if (!checkpoint) continue;
    // The texts are written only to locate and show a difference (`locate`).
    if (canonicallyEqual(a, b)) {
      lastEqual = i + 1;
      continue;
    }
    return [locate(records, copies, projection, lastEqual, i)];
  }
  return [];
}

/** Refolds both up to the last equal checkpoint, then compares after every event. */
function locate<S>(
  records: readonly CheckedEvent[],
  copies: readonly CheckedEvent[],
  projection: Projection<S>,
  from: number,
  to: number,
): Violation {
  let a = projection.initialState();
  let b = projection.initialState();
  for (let i = 0; i <= to; i++) {
    const r = records[i]!;
    const c = copies[i]!;
    a = projection.evolve(a, r.event, { seq: r.seq, timeMs: r.timeMs });
    b = projection.evolve(b, c.event, { seq: c.seq, timeMs: c.timeMs });
    if (i < from) continue;
    const ja = canonicalJson(a);
    const jb = canonicalJson(b);
    if (ja !== jb) {
      return {
        rule: "replay-determinism",
        seq: r.seq,
        message: `two folds of the same log differ after the event at ${r.seq} (${r.event.body.case ?? "unknown kind"}): ${firstDifference(ja, jb)}`,
      };
    }
  }
  const last = records[to]!;
  return {
    rule: "replay-determinism",
    seq: last.seq,
    message: `two folds of the same log differ by sequence ${last.seq}`,
  };
}

function firstDifference(a: string, b: string): string {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  const start = Math.max(0, i - 40);
  return `first difference at character ${i}: …${a.slice(start, i + 40)}… vs …${b.slice(start, i + 40)}…`;
}
