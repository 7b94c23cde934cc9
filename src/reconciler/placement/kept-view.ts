/**
 * The fleet as placement sees it before a pass allocates anything, kept
 * across passes: one view per node (its GPUs, with those the replicas'
 * shards hold taken) and, per model/profile, every node's fit indexed
 * (fit-index.ts). Building them from every node and every replica would
 * cost a pass that places one replica about 20 ms at 10,000 nodes (the
 * placement bench's goal for the whole pass); kept, that pass costs what
 * changed since the last one.
 *
 * How it stays exact: it follows the change marks of the nodes and the
 * replica tables (projections/record-table.ts), which the fold, a
 * pass's fork and its release all make. Before a pass uses it, it re-reads
 * the marked replicas (which nodes their shards hold), rebuilds the views
 * of the nodes a marked node or replica concerns, and re-evaluates those
 * nodes in every kept fit index. A pass's own allocations never reach it:
 * the pass changes copies (view.ts). Whatever is marked in a pass (the
 * fork's changes) is marked again when the fork is released, so the next
 * pass reads the records as they are then. It is derived data kept beside
 * the tables (keyed by the node table), never in the state.
 *
 * It starts again from every node when the set of nodes changes (a node
 * registers for the first time), when the replicas container is another
 * one, and its fit indexes when the catalog changes.
 */

import type { DeepReadonly } from "../../projections/index.js";
import {
  type ChangeFollower,
  type FleetView,
  type NodeState,
  type ProfileSpec,
  type ReplicaState,
  sameKeys,
  type TableView,
} from "../../projections/index.js";
import { fitNode, type Policy } from "./fit.js";
import { FitIndex } from "./fit-index.js";
import { nodeView, occupy } from "./make-node-view.js";
import type { NodeView } from "./node-view.js";

type Nodes = TableView<NodeState>;
type Replicas = TableView<ReplicaState>;

/** GPUs that a replica's shard not asked to stop holds on a node. */
interface Held {
  nodeId: string;
  gpuIndices: readonly number[];
  model: string;
}

const NONE: readonly Held[] = [];

/** A kept fit index and what it was evaluated for (cooldowns left out: a pass adds them). */
interface KeptFits {
  model: string;
  profile: ProfileSpec;
  policy: Policy;
  index: FitIndex;
}

export class KeptView {
  /** Node ids in sorted order: a node's position. */
  #ids: readonly string[];
  readonly #pos = new Map<string, number>();
  /** Each node's view by position; a view is never changed once here, only replaced. */
  readonly #nodes: NodeView[];
  /** Bumped whenever a view is replaced: a pass's copies taken before are from an older generation. */
  generation = 0;
  /** What each replica holds, as last read. */
  readonly #held = new Map<string, readonly Held[]>();
  /** The replicas holding GPUs on each node (whether or not the node exists). */
  readonly #holders = new Map<string, Set<string>>();
  /** Fit indexes by model and profile name. */
  readonly #fits = new Map<string, KeptFits>();
  #catalog: unknown;
  readonly #nodeChanges: ChangeFollower;
  readonly #replicaChanges: ChangeFollower;

  constructor(
    readonly nodeRecords: Nodes,
    readonly replicaRecords: Replicas,
    catalog: unknown,
  ) {
    // Followed first: a mark made from here on is taken by the next sync.
    this.#nodeChanges = nodeRecords.followChanges();
    this.#replicaChanges = replicaRecords.followChanges();
    this.#catalog = catalog;
    for (const id of replicaRecords.sortedKeys())
      this.#hold(id, heldBy(replicaRecords.get(id) as DeepReadonly<ReplicaState>));
    this.#ids = nodeRecords.sortedKeys();
    this.#nodes = this.#ids.map((id, pos) => {
      this.#pos.set(id, pos);
      return this.#build(id, pos);
    });
  }

  /** The views by position (shared: never change it or them). */
  get nodes(): readonly NodeView[] {
    return this.#nodes;
  }

  position(nodeId: string): number | undefined {
    return this.#pos.get(nodeId);
  }

  /**
   * Catches up with the marked records of `state` (the containers this view
   * follows). False when it cannot (another replicas container, nodes added
   * or removed): the caller starts a new one.
   */
  sync(state: FleetView): boolean {
    if (state.replicas.replicas !== this.replicaRecords || state.inventory.nodes !== this.nodeRecords)
      return false;
    const ids = this.nodeRecords.sortedKeys();
    if (ids !== this.#ids) {
      if (!sameKeys(ids, this.#ids)) return false;
      this.#ids = ids;
    }
    if (state.replicas.catalog !== this.#catalog) {
      this.#catalog = state.replicas.catalog;
      this.#fits.clear();
    }
    const stale = new Set(this.#nodeChanges.take());
    for (const id of this.#replicaChanges.take()) {
      const r = this.replicaRecords.get(id);
      const now = r === undefined ? NONE : heldBy(r);
      const was = this.#held.get(id) ?? NONE;
      if (sameHeld(was, now)) continue;
      for (const h of was) stale.add(h.nodeId);
      for (const h of now) stale.add(h.nodeId);
      this.#release(id, was);
      this.#hold(id, now);
    }
    for (const id of stale) {
      const pos = this.#pos.get(id);
      if (pos === undefined) continue;
      const n = this.#build(id, pos);
      this.#nodes[pos] = n;
      for (const f of this.#fits.values()) {
        f.index.set(pos, n.version, fitNode(n, f.model, f.profile, f.policy, false));
      }
    }
    if (stale.size > 0) this.generation++;
    return true;
  }

  /** Every node's fit for one shard of `p` for `model`, no node on cooldown (shared: copy it to change it). */
  index(model: string, p: ProfileSpec, policy: Policy): FitIndex {
    const key = `${model}\u0000${p.name}`;
    let f = this.#fits.get(key);
    if (!f || f.profile !== p || f.policy !== policy) {
      const index = new FitIndex(this.#nodes.length);
      for (const n of this.#nodes) index.set(n.pos, n.version, fitNode(n, model, p, policy, false));
      f = { model, profile: p, policy, index };
      this.#fits.set(key, f);
    }
    return f.index;
  }

  /** What the fit indexes were kept for, to check them against a fresh build. */
  keptFits(): ReadonlyArray<Omit<KeptFits, "index"> & { index: FitIndex }> {
    return [...this.#fits.values()];
  }

  /** Stops following the containers' marks (a new view replaces this one). */
  stop(): void {
    this.#nodeChanges.stop();
    this.#replicaChanges.stop();
  }

  #build(id: string, pos: number): NodeView {
    const n = nodeView(this.nodeRecords.get(id) as DeepReadonly<NodeState>, false, pos);
    for (const replicaId of this.#holders.get(id) ?? []) {
      for (const h of this.#held.get(replicaId) ?? NONE)
        if (h.nodeId === id) occupy(n, h.gpuIndices, h.model);
    }
    return n;
  }

  #hold(replicaId: string, held: readonly Held[]): void {
    if (held.length === 0) return;
    this.#held.set(replicaId, held);
    for (const h of held) {
      let s = this.#holders.get(h.nodeId);
      if (!s) {
        s = new Set();
        this.#holders.set(h.nodeId, s);
      }
      s.add(replicaId);
    }
  }

  #release(replicaId: string, held: readonly Held[]): void {
    this.#held.delete(replicaId);
    for (const h of held) {
      const s = this.#holders.get(h.nodeId);
      if (!s) continue;
      s.delete(replicaId);
      if (s.size === 0) this.#holders.delete(h.nodeId);
    }
  }
}

function heldBy(r: DeepReadonly<ReplicaState>): readonly Held[] {
  let out: Held[] | undefined;
  for (const s of r.shards) {
    if (s.desired === "stopped") continue;
    out ??= [];
    out.push({ nodeId: s.nodeId, gpuIndices: s.gpuIndices.slice(), model: r.model });
  }
  return out ?? NONE;
}

function sameHeld(a: readonly Held[], b: readonly Held[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] as Held;
    const y = b[i] as Held;
    if (x.nodeId !== y.nodeId || x.model !== y.model || x.gpuIndices.length !== y.gpuIndices.length)
      return false;
    for (let j = 0; j < x.gpuIndices.length; j++) if (x.gpuIndices[j] !== y.gpuIndices[j]) return false;
  }
  return true;
}

const kept = new WeakMap<Nodes, KeptView>();

/** The kept view of `state`'s fleet, caught up with every change marked since it was last used. */
export function keptView(state: FleetView): KeptView {
  const nodes = state.inventory.nodes;
  let k = kept.get(nodes);
  if (k?.sync(state)) return k;
  k?.stop();
  k = new KeptView(nodes, state.replicas.replicas, state.replicas.catalog);
  kept.set(nodes, k);
  return k;
}

/**
 * Throws unless the kept view of `state` (if any) holds what a fresh build
 * would: every node's view, and every kept fit index's fits, order and
 * reason counts. For tests, to catch a change it was not told of.
 */
export function verifyKeptView(state: FleetView): void {
  const k = kept.get(state.inventory.nodes);
  if (!k?.sync(state)) return;
  const fresh = new KeptView(state.inventory.nodes, state.replicas.replicas, state.replicas.catalog);
  fresh.stop();
  const problems: string[] = [];
  if (k.nodes.length !== fresh.nodes.length)
    problems.push(`${k.nodes.length} nodes, ${fresh.nodes.length} fresh`);
  fresh.nodes.forEach((want, pos) => {
    const have = k.nodes[pos];
    const a = have ? describeNode(have) : "none";
    const b = describeNode(want);
    if (a !== b) problems.push(`node ${want.nodeId}: kept ${a}, fresh ${b}`);
  });
  for (const f of k.keptFits()) {
    const want = fresh.index(f.model, f.profile, f.policy);
    const a = describeFits(f.index);
    const b = describeFits(want);
    if (a !== b) problems.push(`fits of ${f.model}/${f.profile.name}: kept ${a}, fresh ${b}`);
    k.nodes.forEach((n, pos) => {
      if (f.index.version(pos) !== n.version)
        problems.push(`fit of ${n.nodeId} for ${f.model} is of an older view`);
    });
  }
  if (problems.length > 0)
    throw new Error(`the kept placement view is stale:\n${problems.slice(0, 5).join("\n")}`);
}

function describeNode(n: NodeView): string {
  const shards = [...n.modelShards].sort(([a], [b]) => (a < b ? -1 : 1));
  return JSON.stringify([
    n.nodeId,
    n.blocked,
    n.sessionId,
    n.labels,
    n.gpus,
    [...n.fabricsByKind],
    n.allocatedGpus,
    n.pos,
    shards,
  ]);
}

function describeFits(index: FitIndex): string {
  return JSON.stringify([
    Array.from({ length: index.nodes }, (_, pos) => index.fit(pos)),
    index.best(index.nodes),
    [...index.reasons].sort(),
    index.fitCount,
  ]);
}
