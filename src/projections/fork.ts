/**
 * A working copy of the fleet that costs what it changes. A reconcile pass
 * folds its own decisions into a working state as it goes (so later rules
 * see earlier ones' effect) and must leave the state it was given as it
 * was. Cloning the whole fleet for that made every pass cost the size of
 * the fleet; so did copying the two big containers, nodes and replicas
 * (about 4 ms each at 10,000 records, most of a pass that changes one).
 *
 * So a fork shares the nodes and replicas containers with the original and
 * keeps a journal instead: while the pass folds into the fork
 * (`Fork.fold`), the first change to each record saves what it was (a deep
 * copy of a record changed in place, the record a new one replaced, or that
 * the key was absent), and `Fork.release` puts every saved record back,
 * restores the record order a removal changed, and the indexes kept beside
 * the replicas (shard owners, key lists). Records are changed in place, so
 * anything the pass holds (a rule looping over records it read before a
 * unit was folded) sees every change; after the release the original's
 * container holds the saved copies. While a fork is in use its original's
 * nodes and replicas are the fork's: nothing may read the original then
 * (a pass is synchronous, and the fork is released when it ends).
 *
 * The small containers (gateways, rollouts, autoscale) are copied
 * (`fork`): the first write of a record still shared with the original
 * gives the original's container a deep copy of it. Records that the fold
 * only adds, replaces or deletes (commands, cooldowns, failures,
 * endpoints, undeliverable commands) need nothing more than the container
 * copy. Outside a fork `writable` is a plain lookup.
 *
 * Rules for the fold (replicas.ts, inventory.ts): a record of a container
 * listed in `forkFleet` that is changed in place is fetched with
 * `writable` first (also outside a pass: the indexes of record-index.ts
 * rely on it); nodes and replicas are added and removed with `putRecord`
 * / `dropRecord` (sorted-keys.ts).
 */
import { markChanged } from "./record-index.js";
import { forgetShards, recordShards } from "./shard-owners.js";
import { type KeyLists, restoreKeyLists, saveKeyLists } from "./sorted-keys.js";
import type { FleetState, ReplicaState } from "./state.js";

/** Fork container → the container it was copied from. */
const origins = new WeakMap<object, Record<string, unknown>>();

function fork<T>(rec: Record<string, T>): Record<string, T> {
  const copy = shallowCopy(rec);
  origins.set(copy, rec);
  return copy;
}

/**
 * The same keys in the same order, sharing the values. Without a prototype:
 * copying a large record into one is several times faster than a spread
 * into a plain object, and a fork is only read as a record (keys, values,
 * JSON), never asked for Object methods.
 */
function shallowCopy<T>(rec: Record<string, T>): Record<string, T> {
  const copy = Object.create(null) as Record<string, T>;
  for (const k in rec) copy[k] = rec[k] as T;
  return copy;
}

/** What a journaled container held under a key before the pass first changed it. */
interface Saved {
  existed: boolean;
  prev: unknown;
}

/** The journal of one shared container. */
interface ContainerJournal {
  saved: Map<string, Saved>;
  /** Its key lists before the pass first added or removed a key (undefined: not saved yet). */
  keyLists: KeyLists | null | undefined;
  /** Its key order before the pass first removed a key, when it did. */
  order: string[] | undefined;
}

/** Shared container → the journal recording into it while a fork folds. */
const recording = new WeakMap<object, ContainerJournal>();

/** A working copy of the fleet: fold into `state` with `fold`, then `release` once. */
export interface Fork {
  readonly state: FleetState;
  /** Runs a fold into `state`, journaling its changes to the shared containers. */
  fold(run: () => void): void;
  /** Gives the original back exactly what it held. Call once, when done with the fork. */
  release(): void;
}

/** A fork of `state` (see above). */
export function forkFleet(state: FleetState): Fork {
  const r = state.replicas;
  const work: FleetState = {
    ...state,
    inventory: {
      ...state.inventory,
      nodes: state.inventory.nodes,
      gateways: fork(state.inventory.gateways),
    },
    replicas: {
      ...r,
      replicas: r.replicas,
      rollouts: fork(r.rollouts),
      autoscale: fork(r.autoscale),
      commands: shallowCopy(r.commands),
      undeliverable: shallowCopy(r.undeliverable),
      failures: shallowCopy(r.failures),
      cooldowns: shallowCopy(r.cooldowns),
      endpoints: shallowCopy(r.endpoints),
      ...(r.refusedResults ? { refusedResults: shallowCopy(r.refusedResults) } : {}),
    },
  };
  const nodes: ContainerJournal = { saved: new Map(), keyLists: undefined, order: undefined };
  const replicas: ContainerJournal = { saved: new Map(), keyLists: undefined, order: undefined };
  let released = false;
  return {
    state: work,
    fold(run) {
      if (released) throw new Error("a released fork cannot be folded into");
      recording.set(state.inventory.nodes, nodes);
      recording.set(r.replicas, replicas);
      try {
        run();
      } finally {
        recording.delete(state.inventory.nodes);
        recording.delete(r.replicas);
      }
    },
    release() {
      if (released) return;
      released = true;
      restore(state.inventory.nodes, nodes);
      restore(r.replicas as Record<string, ReplicaState>, replicas, {
        before: (rec, x) => forgetShards(rec, x),
        after: (rec, x) => recordShards(rec, x),
      });
    },
  };
}

function restore<T>(
  rec: Record<string, T>,
  j: ContainerJournal,
  index?: { before(rec: Record<string, T>, v: T): void; after(rec: Record<string, T>, v: T): void },
): void {
  for (const [id, s] of j.saved) {
    const now = rec[id];
    if (now !== undefined) index?.before(rec, now);
    if (s.existed) {
      rec[id] = s.prev as T;
      index?.after(rec, s.prev as T);
    } else delete rec[id];
    markChanged(rec, id);
  }
  // A record removed and put back went to the end: put every key back in its place.
  if (j.order) {
    for (const k of j.order) {
      const v = rec[k] as T;
      delete rec[k];
      rec[k] = v;
    }
  }
  if (j.keyLists !== undefined) restoreKeyLists(rec, j.keyLists);
}

/**
 * Called by `putRecord` / `dropRecord` before they add, replace or remove
 * `rec[id]`: while a fork folds into a shared container, saves what it held.
 */
export function beforeKeyChange(rec: Record<string, unknown>, id: string, removing: boolean): void {
  const j = recording.get(rec);
  if (!j) return;
  if (j.keyLists === undefined) j.keyLists = saveKeyLists(rec);
  if (removing && j.order === undefined && Object.hasOwn(rec, id)) {
    // The order before the pass: keys it added went to the end, so they are left out.
    j.order = Object.keys(rec).filter((k) => j.saved.get(k)?.existed !== false);
  }
  if (j.saved.has(id)) return;
  const existed = Object.hasOwn(rec, id);
  // A record replaced or removed is not changed after: kept as it is.
  j.saved.set(id, { existed, prev: existed ? rec[id] : undefined });
}

/**
 * The record under `id`, safe to change in place: if `rec` is a fork's
 * container still sharing it, the original's container gets a copy first.
 */
export function writable<T>(rec: Record<string, T>, id: string): T | undefined {
  const v = rec[id];
  if (v === undefined) return v;
  markChanged(rec, id);
  const j = recording.get(rec);
  if (j) {
    if (!j.saved.has(id)) j.saved.set(id, { existed: true, prev: structuredClone(v) });
    return v;
  }
  const origin = origins.get(rec);
  if (origin !== undefined && origin[id] === v) origin[id] = structuredClone(v);
  return v;
}

/** The container a fork's container was copied from, if `rec` is one. */
export function originOf<T>(rec: Record<string, T>): Record<string, T> | undefined {
  return origins.get(rec) as Record<string, T> | undefined;
}
