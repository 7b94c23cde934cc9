/**
 * What placement knows about the fleet during one pass: per node, why it
 * cannot take new work at all (if so), and per GPU whether it is healthy,
 * free and how much memory it has left. Starts from the view kept across
 * passes (kept-view.ts), then updated as the pass allocates GPUs, so two
 * replicas placed in one pass never share a GPU. The pass changes copies:
 * a node's view is copied the first time the pass allocates on it, a fit
 * index the first time the pass asks for it, so the kept view stays what
 * the state says.
 */
import type {
  DeepReadonly,
  FleetView as FleetStateView,
  NodeState,
  ProfileSpec,
} from "../../projections/index.js";
import { fitNode, type NodeFit, type Policy } from "./fit.js";
import { FitIndex } from "./fit-index.js";
import { type KeptView, keptView } from "./kept-view.js";
import { blockedReason, copyNodeView, nextVersion, occupy } from "./make-node-view.js";
import type { NodeView } from "./node-view.js";

export class FleetView {
  readonly #kept: KeptView;
  /**
   * This pass's own copies of node views, by position; every other node's
   * view is the kept one (no copy of 50,000 views per pass).
   */
  readonly #own = new Map<number, NodeView>();
  /** The kept view's generation when this view was made (its node views are read from the kept ones). */
  readonly #generation: number;
  /** Nodes on cooldown, per model. */
  readonly #cooldowns = new Map<string, Set<string>>();
  /** Node fits per model/profile, valid while the node's version is unchanged. */
  readonly #fits = new Map<string, FitIndex>();
  /** Positions of the nodes this pass changed, in order (what the fit indexes catch up on). */
  readonly #changed: number[] = [];

  /**
   * @param unadopted nodes whose registration has not been handled yet: they take nothing until it is.
   */
  constructor(state: FleetStateView, nowMs: number, unadopted: ReadonlySet<string>) {
    this.#kept = keptView(state);
    this.#generation = this.#kept.generation;
    for (const c of Object.values(state.replicas.cooldowns)) {
      if (c.untilMs <= nowMs) continue;
      const set = this.#cooldowns.get(c.model) ?? new Set<string>();
      set.add(c.nodeId);
      this.#cooldowns.set(c.model, set);
    }
    // The kept views count a node as adopted once the state says so; the pass goes by its start.
    for (const id of unadopted) {
      const pos = this.#kept.position(id);
      if (pos === undefined) continue;
      const blocked = blockedReason(state.inventory.nodes.get(id) as DeepReadonly<NodeState>, true);
      if ((this.nodeAt(pos) as NodeView).blocked === blocked) continue;
      const n = this.#ownView(pos);
      n.blocked = blocked;
      n.version = nextVersion();
      this.#changed.push(pos);
    }
  }

  /** How many nodes the inventory has. */
  get nodeCount(): number {
    return this.#kept.nodes.length;
  }

  /** The view of the node at `pos` (positions in node id order, the deterministic tie-break). */
  nodeAt(pos: number): NodeView | undefined {
    return this.#own.get(pos) ?? this.#kept.nodes[pos];
  }

  /** Every node's view, sorted by id. */
  *allNodes(): IterableIterator<NodeView> {
    const n = this.nodeCount;
    for (let pos = 0; pos < n; pos++) yield this.nodeAt(pos) as NodeView;
  }

  node(id: string): NodeView | undefined {
    const pos = this.#kept.position(id);
    return pos === undefined ? undefined : this.nodeAt(pos);
  }

  onCooldown(model: string, nodeId: string): boolean {
    return this.#cooldowns.get(model)?.has(nodeId) ?? false;
  }

  /**
   * Every node's fit for one shard of `p` for `model`, indexed by score and
   * reason: a copy of the kept index with this pass's cooldowns, then
   * re-evaluating only the nodes changed since it last looked.
   */
  index(model: string, p: ProfileSpec, policy: Policy): FitIndex {
    const key = `${model}\u0000${p.name}`;
    let cache = this.#fits.get(key);
    if (!cache) {
      cache = this.#start(model, p, policy);
      this.#fits.set(key, cache);
    }
    for (; cache.seen < this.#changed.length; cache.seen++) {
      const n = this.nodeAt(this.#changed[cache.seen] as number) as NodeView;
      if (cache.version(n.pos) !== n.version) cache.set(n.pos, n.version, this.#fit(n, model, p, policy));
    }
    return cache;
  }

  #start(model: string, p: ProfileSpec, policy: Policy): FitIndex {
    if (this.#kept.generation !== this.#generation) {
      // The kept view moved on since this view copied it (another view was made): evaluate every node here.
      const index = new FitIndex(this.nodeCount);
      for (const n of this.allNodes()) index.set(n.pos, n.version, this.#fit(n, model, p, policy));
      index.seen = this.#changed.length;
      return index;
    }
    const index = this.#kept.index(model, p, policy).copy();
    index.seen = 0;
    for (const nodeId of this.#cooldowns.get(model) ?? []) {
      const pos = this.#kept.position(nodeId);
      if (pos === undefined) continue;
      const n = this.nodeAt(pos) as NodeView;
      index.set(pos, n.version, this.#fit(n, model, p, policy));
    }
    return index;
  }

  #fit(n: NodeView, model: string, p: ProfileSpec, policy: Policy): NodeFit {
    return fitNode(n, model, p, policy, this.onCooldown(model, n.nodeId));
  }

  /** Marks GPUs as taken by a shard of `model` placed in this pass. */
  allocate(nodeId: string, gpuIndices: readonly number[], model: string): void {
    const pos = this.#kept.position(nodeId);
    if (pos === undefined) return;
    occupy(this.#ownView(pos), gpuIndices, model);
    this.#changed.push(pos);
  }

  /** The view at `pos`, copied first if it is still the kept one. */
  #ownView(pos: number): NodeView {
    let n = this.#own.get(pos);
    if (n === undefined) {
      n = copyNodeView(this.#kept.nodes[pos] as NodeView);
      this.#own.set(pos, n);
    }
    return n;
  }
}
