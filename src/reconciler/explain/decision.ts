/**
 * The decision behind a replica as it stands: the placement that put it
 * where it is (chosen candidate and runners-up with their scores), or, when
 * its newest word is "pending", how many nodes each reason ruled out. Pure.
 */
import type { RecordedPass } from "./select.js";

export interface Candidate {
  nodeIds: string[];
  score: number;
}

export interface PlacementDecision {
  seq: number;
  timeMs: number;
  profile: string;
  policy: string;
  chosen: Candidate | null;
  runnersUp: Candidate[];
  nodes: Array<{ nodeId: string; gpuIndices: number[] }>;
  explanation: string;
}

export interface PendingDecision {
  seq: number;
  timeMs: number;
  nodesConsidered: number;
  nodesFit: number;
  /** Most nodes first. */
  ruledOut: Array<{ reason: string; nodes: number }>;
  explanation: string;
}

export interface ReplicaDecision {
  /** The newest placement (null: never placed in the passes read). */
  placed: PlacementDecision | null;
  /** The newest pending verdict when it is newer than the placement; otherwise null. */
  pending: PendingDecision | null;
}

export function replicaDecision(passes: Iterable<RecordedPass>, replicaId: string): ReplicaDecision {
  let placed: PlacementDecision | null = null;
  let pending: PendingDecision | null = null;
  for (const p of passes) {
    for (const d of p.pass.decisions) {
      const k = d.kind;
      if (k.case === "replicaPlaced" && k.value.replicaId === replicaId) {
        placed = {
          seq: p.seq,
          timeMs: p.timeMs,
          profile: k.value.profile,
          policy: k.value.policy,
          chosen: k.value.chosen
            ? { nodeIds: [...k.value.chosen.nodeIds], score: k.value.chosen.score }
            : null,
          runnersUp: k.value.runnersUp.map((c) => ({ nodeIds: [...c.nodeIds], score: c.score })),
          nodes: k.value.shards.map((s) => ({ nodeId: s.nodeId, gpuIndices: [...s.gpuIndices] })),
          explanation: d.explanation,
        };
        pending = null;
      } else if (k.case === "replicaPending" && k.value.replicaId === replicaId) {
        pending = {
          seq: p.seq,
          timeMs: p.timeMs,
          nodesConsidered: k.value.nodesConsidered,
          nodesFit: k.value.nodesFit,
          ruledOut: k.value.ruledOut
            .map((r) => ({ reason: r.reason, nodes: r.nodes }))
            .sort((a, b) => b.nodes - a.nodes || (a.reason < b.reason ? -1 : 1)),
          explanation: d.explanation,
        };
      }
    }
  }
  return { placed, pending };
}
