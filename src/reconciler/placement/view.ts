/**
 * What placement knows about the fleet during one pass: per node, why it
 * cannot take new work at all (if so), and per GPU whether it is healthy,
 * free and how much memory it has left. Built once per pass from the state,
 * then updated as the pass allocates GPUs, so two replicas placed in one
 * pass never share a GPU.
 */
import {
  type FabricState,
  type FleetState,
  type GpuState,
  type NodeState,
  type ProfileSpec,
  type ReplicaState,
  sortedKeys,
} from "../../projections/index.js";
import { fitNode, type NodeFit, type Policy } from "./fit.js";
import { FitIndex } from "./fit-index.js";
import type { GpuView, NodeView } from "./node-view.js";

export class FleetView {
  /** Every node of the inventory, sorted by id (the deterministic tie-break). */
  readonly nodes: NodeView[];
  readonly #byId = new Map<string, NodeView>();
  /** Nodes on cooldown, per model. */
  readonly #cooldowns = new Map<string, Set<string>>();
  /** Node fits per model/profile, valid while the node's version is unchanged. */
  readonly #fits = new Map<string, FitIndex>();
  /** Positions of the nodes allocated on in this pass, in order (what the fit indexes catch up on). */
  readonly #allocated: number[] = [];

  /**
   * @param unadopted nodes whose registration has not been handled yet: they take nothing until it is.
   */
  constructor(state: FleetState, nowMs: number, unadopted: ReadonlySet<string>) {
    const ids = sortedKeys(state.inventory.nodes);
    this.nodes = ids.map((id) => nodeView(state.inventory.nodes[id] as NodeState, unadopted.has(id)));
    this.nodes.forEach((n, i) => {
      n.pos = i;
      this.#byId.set(n.nodeId, n);
    });
    const replicas = state.replicas.replicas;
    for (const id in replicas) {
      const r = replicas[id] as ReplicaState;
      for (const s of r.shards) {
        if (s.desired === "stopped") continue;
        const n = this.#byId.get(s.nodeId);
        if (!n) continue;
        this.#take(n, s.gpuIndices, r.model);
      }
    }
    for (const c of Object.values(state.replicas.cooldowns)) {
      if (c.untilMs <= nowMs) continue;
      const set = this.#cooldowns.get(c.model) ?? new Set<string>();
      set.add(c.nodeId);
      this.#cooldowns.set(c.model, set);
    }
  }

  node(id: string): NodeView | undefined {
    return this.#byId.get(id);
  }

  onCooldown(model: string, nodeId: string): boolean {
    return this.#cooldowns.get(model)?.has(nodeId) ?? false;
  }

  /**
   * Whether each node fits one shard of `p` for `model`, in node order.
   */
  fits(model: string, p: ProfileSpec, policy: Policy): NodeFit[] {
    return this.index(model, p, policy).fits as NodeFit[];
  }

  /**
   * Every node's fit for one shard of `p` for `model`, indexed by score and
   * reason. Placing a replica changes only the nodes it lands on, so the
   * index is built once per model/profile in a pass and then re-evaluates
   * only the nodes allocated on since it last looked.
   */
  index(model: string, p: ProfileSpec, policy: Policy): FitIndex {
    const key = `${model}\u0000${p.name}`;
    let cache = this.#fits.get(key);
    if (!cache) {
      cache = new FitIndex(this.nodes.length);
      for (const n of this.nodes) cache.set(n.pos, n.version, this.#fit(n, model, p, policy));
      cache.seen = this.#allocated.length;
      this.#fits.set(key, cache);
      return cache;
    }
    for (; cache.seen < this.#allocated.length; cache.seen++) {
      const n = this.nodes[this.#allocated[cache.seen] as number] as NodeView;
      if (cache.versions[n.pos] !== n.version) cache.set(n.pos, n.version, this.#fit(n, model, p, policy));
    }
    return cache;
  }

  #fit(n: NodeView, model: string, p: ProfileSpec, policy: Policy): NodeFit {
    return fitNode(n, model, p, policy, this.onCooldown(model, n.nodeId));
  }

  /** Marks GPUs as taken by a shard of `model` placed in this pass. */
  allocate(nodeId: string, gpuIndices: readonly number[], model: string): void {
    const n = this.#byId.get(nodeId);
    if (!n) return;
    this.#take(n, gpuIndices, model);
    this.#allocated.push(n.pos);
  }

  #take(n: NodeView, gpuIndices: readonly number[], model: string): void {
    for (const i of gpuIndices) {
      const at = n.gpus[i];
      const g = at?.index === i ? at : n.gpus.find((x) => x.index === i);
      if (g && !g.allocated) {
        g.allocated = true;
        n.allocatedGpus++;
      }
    }
    n.modelShards.set(model, (n.modelShards.get(model) ?? 0) + 1);
    n.version++;
  }
}

function blockedReason(n: NodeState, unadopted: boolean): string {
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
 * What a node's fabrics say, shared by every pass while the node keeps
 * the same fabrics (the fold replaces the array when a registration
 * changes it, never edits it): building it for every node in every pass
 * was a share of a pass at 10,000 nodes.
 */
interface FabricViews {
  fabricsByKind: Map<string, string[]>;
  nvlinkOf: Map<number, string> | undefined;
}

const fabricViews = new WeakMap<readonly FabricState[], FabricViews>();

function fabricViewsOf(fabrics: readonly FabricState[]): FabricViews {
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

/** GPU product names in lower case (a fleet has a handful: one string each, not one per GPU per pass). */
const lowerProducts = new Map<string, string>();

function lowerProduct(product: string): string {
  let lower = lowerProducts.get(product);
  if (lower === undefined) {
    lower = product.toLowerCase();
    if (lowerProducts.size < 1_000) lowerProducts.set(product, lower);
  }
  return lower;
}

function nodeView(n: NodeState, unadopted: boolean): NodeView {
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
    pos: 0,
    version: 0,
    modelShards: new Map(),
  };
}
