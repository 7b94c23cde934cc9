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
  /** Every node of the inventory, sorted by id (the deterministic tie-break). */
  readonly nodes: NodeView[];
  readonly #kept: KeptView;
  /** The kept view's generation when this view copied its nodes. */
  readonly #generation: number;
  /** Positions whose view in `nodes` is this pass's own copy. */
  readonly #owned = new Set<number>();
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
    this.nodes = this.#kept.nodes.slice();
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
      if ((this.nodes[pos] as NodeView).blocked === blocked) continue;
      const n = this.#own(pos);
      n.blocked = blocked;
      n.version = nextVersion();
      this.#changed.push(pos);
    }
  }

  node(id: string): NodeView | undefined {
    const pos = this.#kept.position(id);
    return pos === undefined ? undefined : this.nodes[pos];
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
      const n = this.nodes[this.#changed[cache.seen] as number] as NodeView;
      if (cache.versions[n.pos] !== n.version) cache.set(n.pos, n.version, this.#fit(n, model, p, policy));
    }
    return cache;
  }

  #start(model: string, p: ProfileSpec, policy: Policy): FitIndex {
    if (this.#kept.generation !== this.#generation) {
      // The kept view moved on since this view copied it (another view was made): evaluate every node here.
      const index = new FitIndex(this.nodes.length);
      for (const n of this.nodes) index.set(n.pos, n.version, this.#fit(n, model, p, policy));
      index.seen = this.#changed.length;
      return index;
    }
    const index = this.#kept.index(model, p, policy).copy();
    index.seen = 0;
    for (const nodeId of this.#cooldowns.get(model) ?? []) {
      const pos = this.#kept.position(nodeId);
      if (pos === undefined) continue;
      const n = this.nodes[pos] as NodeView;
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
    occupy(this.#own(pos), gpuIndices, model);
    this.#changed.push(pos);
  }

  /** The view at `pos`, copied first if it is still the kept one. */
  #own(pos: number): NodeView {
    if (!this.#owned.has(pos)) {
      this.nodes[pos] = copyNodeView(this.nodes[pos] as NodeView);
      this.#owned.add(pos);
    }
    return this.nodes[pos] as NodeView;
  }
}
