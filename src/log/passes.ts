/**
 * The one reader of reconciler passes: `llmgw explain`, the API's explain
 * and what-if, and `llmgw what-if` read the passes through it.
 */
import type { ReconcilePass } from "../gen/llmgw/v1/events_pb.js";
import type { Log } from "./log.js";

/** One pass as read from the log. */
export interface RecordedPass {
  seq: number;
  /** The stream's time for the pass (ms since the epoch). */
  timeMs: number;
  pass: ReconcilePass;
}

export interface PassRange {
  /** First sequence read (default 1). */
  fromSeq?: number;
  /** Last sequence read, inclusive (default: the end of the log when the read starts). */
  untilSeq?: number;
  /** Passes stored after this time (ms since the epoch) are not read. */
  untilTimeMs?: number;
  signal?: AbortSignal;
}

/** The reconciler's passes in `range`, in log order. */
export async function* readPasses(log: Log, range: PassRange = {}): AsyncGenerator<RecordedPass> {
  for await (const r of log.read({
    fromSeq: range.fromSeq ?? 1,
    ...(range.untilSeq === undefined ? {} : { untilSeq: range.untilSeq }),
    ...(range.signal ? { signal: range.signal } : {}),
    subjects: [log.subjects.reconciler],
  })) {
    if (range.untilTimeMs !== undefined && r.timeMs > range.untilTimeMs) return;
    if (r.event.body.case === "reconcilePass")
      yield { seq: r.seq, timeMs: r.timeMs, pass: r.event.body.value };
  }
}

/** readPasses, gathered into a list. */
export async function collectPasses(log: Log, range: PassRange = {}): Promise<RecordedPass[]> {
  const passes: RecordedPass[] = [];
  for await (const p of readPasses(log, range)) passes.push(p);
  return passes;
}
