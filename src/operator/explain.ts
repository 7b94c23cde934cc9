/**
 * The reconciler decisions and commands that touched one replica, read from
 * its passes in the log: why it exists, where it went and why, why it waits.
 * Which ones touch it is the reconciler's own rule (touchingReplica); this
 * file only reads the passes.
 */
import type { Log } from "../log/index.js";
import { type RecordedPass, touchingReplica } from "../reconciler/explain/index.js";

export interface ExplainedTouch {
  /** Sequence of the pass in the log. */
  seq: number;
  timeMs: number;
  leaderId: string;
  trigger: string;
  /** The decision kind (e.g. "replicaPlaced"), or "command". */
  kind: string;
  /** The decision's explanation, or the command described. */
  text: string;
}

/**
 * Reads the reconciler's passes from `fromSeq` up to `untilSeq` and returns
 * what touched the replica, oldest first (the newest `limit` kept).
 */
export async function explainReplica(
  log: Log,
  replicaId: string,
  opts: { fromSeq?: number; untilSeq?: number; limit?: number } = {},
): Promise<ExplainedTouch[]> {
  const passes: RecordedPass[] = [];
  for await (const r of log.read({
    fromSeq: opts.fromSeq ?? 1,
    ...(opts.untilSeq === undefined ? {} : { untilSeq: opts.untilSeq }),
    subjects: [log.subjects.reconciler],
  })) {
    if (r.event.body.case === "reconcilePass") {
      passes.push({ seq: r.seq, timeMs: r.timeMs, pass: r.event.body.value });
    }
  }
  const bySeq = new Map(passes.map((p) => [p.seq, p.pass]));
  const touches = touchingReplica(passes, replicaId).map((t) => ({
    seq: t.seq,
    timeMs: t.timeMs,
    leaderId: bySeq.get(t.seq)?.leaderId ?? "",
    trigger: bySeq.get(t.seq)?.trigger ?? "",
    kind: t.kind,
    text: t.text,
  }));
  return touches.slice(-(opts.limit ?? 500));
}
