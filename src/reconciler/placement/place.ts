/**
 * Placement of one replica: the first profile (in the model's preference
 * order) that fits wins; the best-scoring node (or fabric group of nodes for
 * a multi-shard profile) is chosen, ties broken by node id. When nothing
 * fits, every node is counted under the first reason that ruled it out.
 */
import type { ModelSpec, ProfileSpec } from "../../projections/index.js";
import type { NodeFit } from "./fit.js";
import { chooseGpus, type Policy, round } from "./fit.js";
import type { FitIndex } from "./fit-index.js";
import type { NodeView } from "./node-view.js";
import type { FleetView } from "./view.js";

export interface ShardSlot {
  rank: number;
  nodeId: string;
  sessionId: string;
  gpuIndices: number[];
}

export interface ScoredCandidate {
  nodeIds: string[];
  score: number;
}

export interface RuledOutCount {
  reason: string;
  nodes: number;
}

export interface Placed {
  kind: "placed";
  profile: ProfileSpec;
  shards: ShardSlot[];
  chosen: ScoredCandidate;
  runnersUp: ScoredCandidate[];
}

export interface NoFit {
  kind: "pending";
  nodesConsidered: number;
  nodesFit: number;
  /** For the most preferred profile, largest count first. */
  ruledOut: RuledOutCount[];
  explanation: string;
}

export type PlacementResult = Placed | NoFit;

/** How many runners-up a placement records. */
export const RUNNERS_UP = 3;

interface Fitting {
  nodeId: string;
  sessionId: string;
  score: number;
}

interface ProfileOutcome {
  placed?: Placed;
  fit: number;
  ruledOut: RuledOutCount[];
}

export function placeReplica(view: FleetView, model: ModelSpec, policy: Policy): PlacementResult {
  // Made only once a profile does not fit: most placements take their first.
  let outcomes: Array<{ profile: ProfileSpec; outcome: ProfileOutcome }> | undefined;
  for (const p of model.profiles) {
    const outcome = tryProfile(view, model.name, p, policy);
    if (outcome.placed) return outcome.placed;
    outcomes ??= [];
    outcomes.push({ profile: p, outcome });
  }
  if (!outcomes) outcomes = [];
  const considered = view.nodeCount;
  const first = outcomes[0];
  if (!first) {
    return {
      kind: "pending",
      nodesConsidered: considered,
      nodesFit: 0,
      ruledOut: [],
      explanation: `model ${model.name} has no profiles`,
    };
  }
  const summary = (o: ProfileOutcome) => summarize(o.fit, considered, o.ruledOut);
  const explanation =
    outcomes.length === 1
      ? summary(first.outcome)
      : `no profile fits: ${outcomes.map((o) => `${o.profile.name}: ${summary(o.outcome)}`).join("; ")}`;
  return {
    kind: "pending",
    nodesConsidered: considered,
    nodesFit: first.outcome.fit,
    ruledOut: first.outcome.ruledOut,
    explanation,
  };
}

/** "0/12 nodes fit: 5 too few healthy GPUs, 4 no 2-node infiniband fabric, 3 suspect" */
export function summarize(fit: number, considered: number, ruledOut: RuledOutCount[]): string {
  const head = `${fit}/${considered} nodes fit`;
  if (considered === 0) return `${head}: the fleet has no nodes`;
  if (ruledOut.length === 0) return head;
  return `${head}: ${ruledOut.map((r) => `${r.nodes} ${r.reason}`).join(", ")}`;
}

/** What a placement's outcome says of ruled-out nodes: nothing (shared, never changed). */
const NONE_RULED_OUT: RuledOutCount[] = [];

function tryProfile(view: FleetView, model: string, p: ProfileSpec, policy: Policy): ProfileOutcome {
  const index = view.index(model, p, policy);
  const shards = Math.max(1, p.shards);
  if (shards === 1) {
    const top = index.best(RUNNERS_UP + 1);
    if (top.length === 0) return { fit: 0, ruledOut: sortReasons(index.reasons) };
    // Read from the index and the view in place: a full placement does this once per replica.
    const chosen = fittingNode(view, index, top[0] as number);
    const score = scoreAt(index, top[0] as number);
    const runnersUp: ScoredCandidate[] = [];
    for (let i = 1; i < top.length; i++) {
      const pos = top[i] as number;
      runnersUp.push({ nodeIds: [fittingNode(view, index, pos).nodeId], score: scoreAt(index, pos) });
    }
    const gpuIndices = take(view, chosen.nodeId, p, model);
    // What ruled nodes out is only told when nothing fits: not counted for a placement.
    return {
      fit: index.fitCount,
      ruledOut: NONE_RULED_OUT,
      placed: {
        kind: "placed",
        profile: p,
        shards: [{ rank: 0, nodeId: chosen.nodeId, sessionId: chosen.sessionId, gpuIndices }],
        chosen: { nodeIds: [chosen.nodeId], score },
        runnersUp,
      },
    };
  }
  const reasons = new Map(index.reasons);
  const fits: Fitting[] = [];
  for (const n of view.allNodes()) {
    const f = index.fit(n.pos) as NodeFit;
    if (f.ok) fits.push({ nodeId: n.nodeId, sessionId: n.sessionId, score: f.score });
  }
  return tryGroups(view, model, p, shards, fits, reasons);
}

/** The view of the node at `pos`, which the index says fits. */
function fittingNode(view: FleetView, index: FitIndex, pos: number): NodeView {
  const n = view.nodeAt(pos);
  if (!n || !index.fit(pos)?.ok) throw new Error(`placement index out of step at node position ${pos}`);
  return n;
}

/** The score of the node at `pos`, which fits (fittingNode checked it). */
function scoreAt(index: FitIndex, pos: number): number {
  const f = index.fit(pos);
  return f?.ok ? f.score : 0;
}

/** A multi-shard profile: `shards` distinct nodes that share one fabric of the profile's kind. */
function tryGroups(
  view: FleetView,
  model: string,
  p: ProfileSpec,
  shards: number,
  fits: Fitting[],
  reasons: Map<string, number>,
): ProfileOutcome {
  const kind = p.fabricKind;
  const groups = new Map<string, Fitting[]>();
  for (const f of fits) {
    const names = kind === "" ? [""] : (view.node(f.nodeId)?.fabricsByKind.get(kind) ?? []);
    for (const name of names) {
      const g = groups.get(name) ?? [];
      g.push(f);
      groups.set(name, g);
    }
  }
  const options: Array<{ fabric: string; members: Fitting[]; score: number }> = [];
  const inBigGroup = new Set<string>();
  for (const [fabric, members] of [...groups].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (members.length < shards) continue;
    for (const m of members) inBigGroup.add(m.nodeId);
    const chosen = best(members, shards);
    const score = round(chosen.reduce((s, m) => s + m.score, 0) / chosen.length);
    options.push({ fabric, members: chosen, score });
  }
  const noFabric = `no ${shards}-node ${kind === "" ? "shared" : kind} fabric`;
  for (const f of fits) {
    if (!inBigGroup.has(f.nodeId)) reasons.set(noFabric, (reasons.get(noFabric) ?? 0) + 1);
  }
  const ruledOut = sortReasons(reasons);
  options.sort((a, b) => b.score - a.score || cmpIds(a.members, b.members) || (a.fabric < b.fabric ? -1 : 1));
  const top = options[0];
  if (!top) return { fit: 0, ruledOut };
  // Ranks follow node id order so that peers are listed the same way on every shard.
  const members = [...top.members].sort((a, b) => (a.nodeId < b.nodeId ? -1 : 1));
  const gpus = members.map((m) => take(view, m.nodeId, p, model));
  return {
    fit: inBigGroup.size,
    ruledOut,
    placed: {
      kind: "placed",
      profile: p,
      shards: members.map((m, rank) => ({
        rank,
        nodeId: m.nodeId,
        sessionId: m.sessionId,
        gpuIndices: gpus[rank] as number[],
      })),
      chosen: { nodeIds: members.map((m) => m.nodeId), score: top.score },
      runnersUp: options.slice(1, RUNNERS_UP + 1).map((o) => ({
        nodeIds: o.members.map((m) => m.nodeId).sort(),
        score: o.score,
      })),
    },
  };
}

/** Chooses the GPUs on a node placement picked and marks them taken. */
function take(view: FleetView, nodeId: string, p: ProfileSpec, model: string): number[] {
  const n = view.node(nodeId);
  if (!n) return [];
  const gpus = chooseGpus(n, p);
  view.allocate(nodeId, gpus, model);
  return gpus;
}

function cmpIds(a: Fitting[], b: Fitting[]): number {
  const x = a.map((m) => m.nodeId).join(",");
  const y = b.map((m) => m.nodeId).join(",");
  return x < y ? -1 : x > y ? 1 : 0;
}

/** The `k` best by score (higher first), ties by node id; one scan, no full sort. */
function best(fits: Fitting[], k: number): Fitting[] {
  const top: Fitting[] = [];
  for (const f of fits) {
    if (top.length === k) {
      const last = top[k - 1] as Fitting;
      if (!better(f, last)) continue;
      top.pop();
    }
    let i = top.length;
    while (i > 0 && better(f, top[i - 1] as Fitting)) i--;
    top.splice(i, 0, f);
  }
  return top;
}

function better(a: Fitting, b: Fitting): boolean {
  return a.score > b.score || (a.score === b.score && a.nodeId < b.nodeId);
}

function sortReasons(m: Map<string, number>): RuledOutCount[] {
  return [...m]
    .map(([reason, nodes]) => ({ reason, nodes }))
    .sort((a, b) => b.nodes - a.nodes || (a.reason < b.reason ? -1 : a.reason > b.reason ? 1 : 0));
}
