/**
 * Node views (node-view.ts): made from a node record, occupied by the
 * shards that hold its GPUs, and copied before a pass allocates on one
 * that is shared (kept-view.ts keeps them across passes).
 */
import type { DeepReadonly, FabricState, GpuState, NodeState } from "../../projections/index.js";
import type { GpuView, NodeView } from "./node-view.js";

/** One counter for every view made or changed, so that a version is never reused. */
let versions = 0;

/** A version no view has had: a fit evaluated at another one is stale. */
export function nextVersion(): number {
  return ++versions;
}

/** Why node `n` takes no new work whatever the profile, or "" when it may. */
export function blockedReason(n: DeepReadonly<NodeState>, unadopted: boolean): string {
  if (n.session === null) {
    if (n.liveness === "lost") return "lost";
    if (n.liveness === "suspect") return "suspect";
    return "not connected";
  }
  if (n.draining) return "draining";
  if (n.cordoned) return "cordoned";
  if (unadopted || n.session.adoptionSeq === 0) return "not adopted yet";
  return "";
}

/**
 * What a node's fabrics say, shared by every view while the node keeps
 * the same fabrics (the fold replaces the array when a registration
 * changes it, never edits it).
 */
interface FabricViews {
  fabricsByKind: Map<string, string[]>;
  nvlinkOf: Map<number, string> | undefined;
}

const fabricViews = new WeakMap<DeepReadonly<FabricState[]>, FabricViews>();

function fabricViewsOf(fabrics: DeepReadonly<FabricState[]>): FabricViews {
  let v = fabricViews.get(fabrics);
  if (v) return v;
  let nvlinkOf: Map<number, string> | undefined;
  const fabricsByKind = new Map<string, string[]>();
  for (const f of fabrics) {
    const names = fabricsByKind.get(f.kind) ?? [];
    if (!names.includes(f.name)) names.push(f.name);
    fabricsByKind.set(f.kind, names);
    if (f.kind !== "nvlink") continue;
    nvlinkOf ??= new Map();
    for (const i of f.gpuIndices) if (!nvlinkOf.has(i)) nvlinkOf.set(i, f.name);
  }
  v = { fabricsByKind, nvlinkOf };
  fabricViews.set(fabrics, v);
  return v;
}

/** GPU product names in lower case (a fleet has a handful: one string each, not one per GPU or fit). */
const lowerProducts = new Map<string, string>();

export function lowerProduct(product: string): string {
  let lower = lowerProducts.get(product);
  if (lower === undefined) {
    lower = product.toLowerCase();
    if (lowerProducts.size < 1_000) lowerProducts.set(product, lower);
  }
  return lower;
}

/** The view of node `n` with none of its GPUs taken yet, at position `pos`. */
export function nodeView(n: DeepReadonly<NodeState>, unadopted: boolean, pos: number): NodeView {
  const { fabricsByKind, nvlinkOf } = fabricViewsOf(n.fabrics);
  const nodeHealthy = n.nodeProblems.length === 0;
  const gpus: GpuView[] = new Array(n.gpus.length);
  let sorted = true;
  for (let i = 0; i < n.gpus.length; i++) {
    const g = n.gpus[i] as GpuState;
    if (i > 0 && (n.gpus[i - 1] as GpuState).index > g.index) sorted = false;
    gpus[i] = {
      index: g.index,
      product: lowerProduct(g.product),
      healthy: nodeHealthy && g.problems.length === 0 && g.faults.length === 0,
      cordoned: g.cordoned,
      freeMb: g.memoryTotalMb - g.memoryUsedMb,
      allocated: false,
      nvlink: nvlinkOf?.get(g.index) ?? "",
    };
  }
  if (!sorted) gpus.sort((a, b) => a.index - b.index);
  return {
    nodeId: n.nodeId,
    blocked: blockedReason(n, unadopted),
    sessionId: n.session?.sessionId ?? "",
    labels: n.labels,
    gpus,
    fabricsByKind,
    allocatedGpus: 0,
    pos,
    version: nextVersion(),
    modelShards: new Map(),
  };
}

/** Marks GPUs of `n` as taken by a shard of `model` (changes `n`: only a view the caller owns). */
export function occupy(n: NodeView, gpuIndices: readonly number[], model: string): void {
  for (const i of gpuIndices) {
    const at = n.gpus[i];
    const g = at?.index === i ? at : n.gpus.find((x) => x.index === i);
    if (g && !g.allocated) {
      g.allocated = true;
      n.allocatedGpus++;
    }
  }
  n.modelShards.set(model, (n.modelShards.get(model) ?? 0) + 1);
  n.version = nextVersion();
}

/** A copy of `n` that can be changed without changing `n` (labels and fabrics are never changed: shared). */
export function copyNodeView(n: NodeView): NodeView {
  return { ...n, gpus: n.gpus.map((g) => ({ ...g })), modelShards: new Map(n.modelShards) };
}
