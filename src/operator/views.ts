/**
 * What the API returns for nodes and replicas: the projected state plus what
 * an operator asks first (which GPUs hold which replica, on which nodes a
 * replica runs). Pure functions of a FleetState.
 */
import {
  type FleetState,
  type GpuState,
  isReady,
  type NodeState,
  type ReplicaState,
  readyCounts,
  resolveMinAvailable,
  type ShardState,
} from "../projections/index.js";

/** A GPU as the inventory holds it, with the shards on it. */
export interface GpuView extends GpuState {
  /** Shards holding this GPU. */
  shards: Array<{ replicaId: string; shardId: string; model: string; state: string }>;
}

export interface NodeView {
  nodeId: string;
  liveness: NodeState["liveness"];
  agentVersion: string;
  /** Where other nodes reach it, as it advertised; "" when it advertised none. */
  advertiseAddress: string;
  labels: Record<string, string>;
  cordoned: boolean;
  cordonReason: string;
  draining: boolean;
  session: { sessionId: string; gatewayId: string; openedSeq: number; identity: string } | null;
  disconnectedSinceMs: number | null;
  lastCloseReason: string;
  nodeProblems: string[];
  fabrics: NodeState["fabrics"];
  gpus: GpuView[];
  gpusTotal: number;
  /** GPUs held by at least one shard. */
  gpusUsed: number;
  /** Replicas with a shard on the node. */
  replicaIds: string[];
  /** What moving work off this node (its drain, a faulty GPU) still waits on, by replica id. */
  waitingOn: DrainWait[];
  lastChangeSeq: number;
}

/** A replica that must leave a node and still serves there, and why it has not left yet. */
export interface DrainWait {
  replicaId: string;
  model: string;
  /** Its replacement, or "" while none was created. */
  replacementId: string;
  /** The disruption budget keeps it serving (a DisruptionBlocked decision), rather than a replacement on its way. */
  blockedByBudget: boolean;
  reason: string;
}

export interface ReplicaView extends Omit<ReplicaState, "disruptionBlocked"> {
  /** Nodes of its shards, in rank order. */
  nodeIds: string[];
  /** Every shard reports RUNNING and none is draining or stopping: it counts as capacity. */
  ready: boolean;
  /** Why its model's disruption budget keeps it serving where it must leave; "" when it does not. */
  disruptionBlocked: string;
}

/** One model's capacity: replicas ready against the catalog's desired count, and its disruption budget. */
export interface ModelReadiness {
  model: string;
  ready: number;
  desired: number;
  /** The budget as the catalog states it ("2", "75%"); "" for none. */
  minAvailable: string;
  /** Ready replicas the budget keeps at the desired count (a percentage rounded up); 0 for none. */
  keepsReady: number;
}

/** Per model, by name: ready/desired (a model gone from the catalog but still holding replicas has desired 0). */
export function modelReadiness(state: FleetState): ModelReadiness[] {
  const specs = new Map(state.replicas.catalog.models.map((m) => [m.name, m]));
  return Object.entries(readyCounts(state.replicas))
    .map(([model, c]) => {
      const stated = specs.get(model)?.minAvailable;
      return { model, ...c, minAvailable: stated ?? "", keepsReady: resolveMinAvailable(stated, c.desired) };
    })
    .sort((a, b) => cmp(a.model, b.model));
}

/**
 * Replicas still serving on a node that drains (or, on any node, one a
 * DisruptionBlocked decision keeps serving), each with what it waits on:
 * the budget's explanation, its replacement's pending reason, or its
 * replacement still loading.
 */
function drainWaits(state: FleetState, n: NodeState, replicaIds: readonly string[]): DrainWait[] {
  const out: DrainWait[] = [];
  for (const id of replicaIds) {
    const r = state.replicas.replicas.get(id);
    if (!r || r.phase === "draining") continue;
    if (!r.shards.some((s) => s.nodeId === n.nodeId && s.desired === "running")) continue;
    if (!n.draining && r.disruptionBlocked === undefined) continue;
    const next = r.replacedBy ? state.replicas.replicas.get(r.replacedBy) : undefined;
    out.push({
      replicaId: id,
      model: r.model,
      replacementId: next?.replicaId ?? "",
      blockedByBudget: r.disruptionBlocked !== undefined,
      reason: r.disruptionBlocked ?? replacementText(next),
    });
  }
  return out;
}

function replacementText(next: ReplicaState | undefined): string {
  if (!next) return "a replacement is to be created";
  if (next.phase === "pending") {
    return `replacement ${next.replicaId} is pending${next.pendingReason ? `: ${next.pendingReason}` : ""}`;
  }
  if (isReady(next)) return `replacement ${next.replicaId} is ready; the drain starts next pass`;
  return `replacement ${next.replicaId} is ${next.phase === "placed" ? "starting" : next.phase}`;
}

/** A shard holds its GPUs until it is both meant to stop and reported gone. */
function holdsGpus(s: ShardState): boolean {
  return !(s.desired === "stopped" && (s.state === "stopped" || s.state === "failed"));
}

type Holders = Map<string, Map<number, GpuView["shards"]>>;

function gpuHolders(state: FleetState): Holders {
  const out: Holders = new Map();
  for (const r of state.replicas.replicas.values()) {
    for (const s of r.shards) {
      if (!holdsGpus(s)) continue;
      let byGpu = out.get(s.nodeId);
      if (!byGpu) {
        byGpu = new Map();
        out.set(s.nodeId, byGpu);
      }
      for (const g of s.gpuIndices) {
        const list = byGpu.get(g) ?? [];
        list.push({ replicaId: r.replicaId, shardId: s.shardId, model: r.model, state: s.state });
        byGpu.set(g, list);
      }
    }
  }
  return out;
}

function nodeViewWith(state: FleetState, n: NodeState, holders: Holders): NodeView {
  const byGpu = holders.get(n.nodeId);
  const gpus = n.gpus.map((g) => ({
    index: g.index,
    uuid: g.uuid,
    product: g.product,
    memoryTotalMb: g.memoryTotalMb,
    memoryUsedMb: g.memoryUsedMb,
    problems: [...g.problems],
    faults: g.faults.map((f) => ({ ...f })),
    cordoned: g.cordoned,
    cordonReason: g.cordonReason,
    shards: byGpu?.get(g.index) ?? [],
  }));
  const replicaIds = [...new Set(gpus.flatMap((g) => g.shards.map((s) => s.replicaId)))].sort();
  return {
    nodeId: n.nodeId,
    liveness: n.liveness,
    agentVersion: n.agentVersion,
    advertiseAddress: n.advertiseAddress,
    labels: { ...n.labels },
    cordoned: n.cordoned,
    cordonReason: n.cordonReason,
    draining: n.draining,
    session: n.session
      ? {
          sessionId: n.session.sessionId,
          gatewayId: n.session.gatewayId,
          openedSeq: n.session.openedSeq,
          identity: n.session.identity,
        }
      : null,
    disconnectedSinceMs: n.disconnectedSinceMs,
    lastCloseReason: n.lastCloseReason,
    nodeProblems: [...n.nodeProblems],
    fabrics: n.fabrics.map((f) => ({ ...f, gpuIndices: [...f.gpuIndices] })),
    gpus,
    gpusTotal: gpus.length,
    gpusUsed: gpus.filter((g) => g.shards.length > 0).length,
    replicaIds,
    waitingOn: drainWaits(state, n, replicaIds),
    lastChangeSeq: n.lastChangeSeq,
  };
}

/** Every node, sorted by id. */
export function nodeViews(state: FleetState): NodeView[] {
  const holders = gpuHolders(state);
  return state.inventory.nodes
    .values()
    .sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0))
    .map((n) => nodeViewWith(state, n, holders));
}

export function nodeView(state: FleetState, nodeId: string): NodeView | undefined {
  const n = state.inventory.nodes.get(nodeId);
  return n ? nodeViewWith(state, n, gpuHolders(state)) : undefined;
}

export function replicaView(r: ReplicaState): ReplicaView {
  const { disruptionBlocked, ...copy } = structuredClone(r);
  const nodeIds: string[] = [];
  for (const s of [...copy.shards].sort((a, b) => a.rank - b.rank)) {
    if (!nodeIds.includes(s.nodeId)) nodeIds.push(s.nodeId);
  }
  // Only a shard's newest load sample: the window the reconciler reads stays out of every listing.
  for (const s of copy.shards) if (s.load) s.load = { ...s.load, samples: s.load.samples.slice(-1) };
  return { ...copy, nodeIds, ready: isReady(r), disruptionBlocked: disruptionBlocked ?? "" };
}

/** Every replica, by model then id. */
export function replicaViews(state: FleetState): ReplicaView[] {
  return state.replicas.replicas
    .values()
    .sort((a, b) => cmp(a.model, b.model) || cmp(a.replicaId, b.replicaId))
    .map(replicaView);
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
