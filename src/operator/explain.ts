/**
 * A replica's story read from the log: the reconciler decisions and commands
 * that touched it (and the decision behind it now: placement with runners-up,
 * or the reasons it waits), and its history (created, placed, each shard's
 * reported state, drained, replaced, removed). Which decisions touch it is
 * the reconciler's own rule (touchingReplica); this file only reads the log.
 */
import { collectPasses, type Log } from "../log/index.js";
import { shardStateName } from "../projections/convert.js";
import { type ReplicaDecision, replicaDecision, touchingReplica } from "../reconciler/explain/index.js";

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

export interface Explained {
  decisions: ExplainedTouch[];
  decision: ReplicaDecision;
}

/**
 * Reads the reconciler's passes from `fromSeq` up to `untilSeq` and returns
 * what touched the replica, oldest first (the newest `limit` kept), and the
 * decision behind it.
 */
export async function explainReplica(
  log: Log,
  replicaId: string,
  opts: { fromSeq?: number; untilSeq?: number; limit?: number } = {},
): Promise<Explained> {
  const passes = await collectPasses(log, {
    fromSeq: opts.fromSeq ?? 1,
    ...(opts.untilSeq === undefined ? {} : { untilSeq: opts.untilSeq }),
  });
  const bySeq = new Map(passes.map((p) => [p.seq, p.pass]));
  const touches = touchingReplica(passes, replicaId).map((t) => ({
    seq: t.seq,
    timeMs: t.timeMs,
    leaderId: bySeq.get(t.seq)?.leaderId ?? "",
    trigger: bySeq.get(t.seq)?.trigger ?? "",
    kind: t.kind,
    text: t.text,
  }));
  return { decisions: touches.slice(-(opts.limit ?? 500)), decision: replicaDecision(passes, replicaId) };
}

export interface HistoryEntry {
  seq: number;
  timeMs: number;
  /** created, placed, adopted, pending, starting, running, draining, stopped, failed, drain, replaced, removed, backoff */
  kind: string;
  text: string;
  nodeId?: string;
}

/**
 * The replica's life in the log, oldest first: lifecycle decisions and each
 * shard state its nodes reported. Pending verdicts repeat every pass while
 * nothing changes, so only changes of the verdict are kept.
 */
export async function replicaHistory(
  log: Log,
  replicaId: string,
  opts: { fromSeq?: number; untilSeq?: number } = {},
): Promise<HistoryEntry[]> {
  const out: HistoryEntry[] = [];
  let lastPending = "";
  for await (const r of log.read({
    fromSeq: opts.fromSeq ?? 1,
    ...(opts.untilSeq === undefined ? {} : { untilSeq: opts.untilSeq }),
    subjects: [log.subjects.reconciler, `${log.subjects.prefix}.node.*`],
  })) {
    const b = r.event.body;
    const at = { seq: r.seq, timeMs: r.timeMs };
    if (b.case === "shardStatus") {
      const st = b.value.status;
      if (st?.replicaId !== replicaId) continue;
      const state = shardStateName(st.state);
      out.push({
        ...at,
        kind: state,
        text: `${st.shardId} ${state} on ${b.value.nodeId}${st.error ? `: ${st.error}` : ""}`,
        nodeId: b.value.nodeId,
      });
      continue;
    }
    if (b.case !== "reconcilePass") continue;
    for (const d of b.value.decisions) {
      const k = d.kind;
      switch (k.case) {
        case "replicaCreated":
          if (k.value.replicaId === replicaId) {
            out.push({ ...at, kind: "created", text: d.explanation });
          } else if (k.value.replaces === replicaId) {
            out.push({ ...at, kind: "replaced", text: `replacement ${k.value.replicaId} created` });
          }
          break;
        case "replicaPlaced":
          if (k.value.replicaId === replicaId) {
            lastPending = "";
            out.push({ ...at, kind: "placed", text: d.explanation });
          }
          break;
        case "shardsAdopted":
          if (k.value.shards.some((s) => s.replicaId === replicaId)) {
            out.push({ ...at, kind: "adopted", text: d.explanation, nodeId: k.value.nodeId });
          }
          break;
        case "replicaPending":
          if (k.value.replicaId === replicaId && d.explanation !== lastPending) {
            lastPending = d.explanation;
            out.push({ ...at, kind: "pending", text: d.explanation });
          }
          break;
        case "replicaDrainStarted":
          if (k.value.replicaId === replicaId || k.value.replacementId === replicaId) {
            out.push({ ...at, kind: "drain", text: d.explanation });
          }
          break;
        case "replicaRemoved":
          if (k.value.replicaId === replicaId) out.push({ ...at, kind: "removed", text: d.explanation });
          break;
        case "replicaFailed":
          if (k.value.replicaId === replicaId) {
            out.push({ ...at, kind: "failed", text: d.explanation, nodeId: k.value.nodeId });
          }
          break;
        case "shardBackoff":
          if (k.value.replicaId === replicaId) out.push({ ...at, kind: "backoff", text: d.explanation });
          break;
        default:
          // Other decisions do not change one replica's life (liveness, cooldowns, re-issues).
          break;
      }
    }
  }
  return out;
}
