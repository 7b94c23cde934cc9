/**
 * What placement knows about the fleet during one pass: per node, why it
 * cannot take new work at all (if so), and per GPU whether it is healthy,
 * free and how much memory it has left. Built once per pass from the state,
 * then updated as the pass allocates GPUs, so two replicas placed in one
 * pass never share a GPU.
 */
import type { FleetState, NodeState, ProfileSpec } from "../../projections/index.js";
import { fitNode, type NodeFit, type Policy } from "./fit.js";

export interface GpuView {
  index: number;
  product: string;
  /** No problem on the GPU (registered or reported since) and none reported for its node. */
  healthy: boolean;
  /** An operator keeps new work off it. */
  cordoned: boolean;
  freeMb: number;
  /** Held by a shard of some replica (ours, not stopped) or taken earlier in this pass. */
  allocated: boolean;
  /** The NVLink domain the GPU is in, or "" (shards prefer GPUs within one domain). */
  nvlink: string;
}

export interface NodeView {
  nodeId: string;
  /** Why the node takes no new work whatever the profile, or "" when it may. */
  blocked: string;
  sessionId: string;
  labels: Record<string, string>;
  gpus: GpuView[];
  /** Fabric names by kind, for multi-node replicas. */
  fabricsByKind: Map<string, string[]>;
  allocatedGpus: number;
  /** Position in FleetView.nodes. */
  pos: number;
  /** Bumped whenever the pass allocates on the node: fits cached for an older version are stale. */
  version: number;
  /** Shards of each model already on the node (spreading one model's replicas). */
  modelShards: Map<string, number>;
}

export class FleetView {
  /** Every node of the inventory, sorted by id (the deterministic tie-break). */
  readonly nodes: NodeView[];
  readonly #byId = new Map<string, NodeView>();
  /** Nodes on cooldown, per model. */
  readonly #cooldowns = new Map<string, Set<string>>();
  /** Node fits per model/profile, valid while the node's version is unchanged. */
  readonly #fits = new Map<string, { versions: Int32Array; fits: Array<NodeFit | undefined> }>();

  /**
   * @param unadopted nodes whose registration has not been handled yet: they take nothing until it is.
   */
  constructor(state: FleetState, nowMs: number, unadopted: ReadonlySet<string>) {
    const ids = Object.keys(state.inventory.nodes).sort();
    this.nodes = ids.map((id) => nodeView(state.inventory.nodes[id] as NodeState, unadopted.has(id)));
    this.nodes.forEach((n, i) => {
      n.pos = i;
      this.#byId.set(n.nodeId, n);
    });
    for (const r of Object.values(state.replicas.replicas)) {
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
   * Placing a replica changes only the nodes it lands on, so fits are
   * cached per node version: a pass placing many replicas re-evaluates only
   * the nodes that changed.
   */
  fits(model: string, p: ProfileSpec, policy: Policy): NodeFit[] {
    const key = `${model}\u0000${p.name}`;
    let cache = this.#fits.get(key);
    if (!cache) {
      cache = { versions: new Int32Array(this.nodes.length).fill(-1), fits: new Array(this.nodes.length) };
      this.#fits.set(key, cache);
    }
    const out: NodeFit[] = new Array(this.nodes.length);
    for (const n of this.nodes) {
      let f = cache.fits[n.pos];
      if (f === undefined || cache.versions[n.pos] !== n.version) {
        f = fitNode(n, model, p, policy, this.onCooldown(model, n.nodeId));
        cache.fits[n.pos] = f;
        cache.versions[n.pos] = n.version;
      }
      out[n.pos] = f;
    }
    return out;
  }

  /** Marks GPUs as taken by a shard of `model` placed in this pass. */
  allocate(nodeId: string, gpuIndices: readonly number[], model: string): void {
    const n = this.#byId.get(nodeId);
    if (n) this.#take(n, gpuIndices, model);
  }

  #take(n: NodeView, gpuIndices: readonly number[], model: string): void {
    for (const i of gpuIndices) {
      const g = n.gpus.find((x) => x.index === i);
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

function nodeView(n: NodeState, unadopted: boolean): NodeView {
  const nvlinkOf = new Map<number, string>();
  const fabricsByKind = new Map<string, string[]>();
  for (const f of n.fabrics) {
    const names = fabricsByKind.get(f.kind) ?? [];
    if (!names.includes(f.name)) names.push(f.name);
    fabricsByKind.set(f.kind, names);
    if (f.kind === "nvlink") for (const i of f.gpuIndices) if (!nvlinkOf.has(i)) nvlinkOf.set(i, f.name);
  }
  const nodeHealthy = n.nodeProblems.length === 0;
  return {
    nodeId: n.nodeId,
    blocked: blockedReason(n, unadopted),
    sessionId: n.session?.sessionId ?? "",
    labels: n.labels,
    gpus: [...n.gpus]
      .sort((a, b) => a.index - b.index)
      .map((g) => ({
        index: g.index,
        product: g.product.toLowerCase(),
        healthy: nodeHealthy && g.problems.length === 0 && g.faults.length === 0,
        cordoned: g.cordoned,
        freeMb: g.memoryTotalMb - g.memoryUsedMb,
        allocated: false,
        nvlink: nvlinkOf.get(g.index) ?? "",
      })),
    fabricsByKind,
    allocatedGpus: 0,
    pos: 0,
    version: 0,
    modelShards: new Map(),
  };
}
