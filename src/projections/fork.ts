/**
 * A working copy of the fleet that costs what it changes. A reconcile pass
 * folds its own decisions into a copy of the state as it goes (so later
 * rules see earlier ones' effect) and must leave the state it was given
 * alone. Cloning the whole fleet for that made every pass cost the size of
 * the fleet (at 10,000 nodes it was most of a pass).
 *
 * A fork copies the records' containers (a shallow copy, one pointer per
 * record) and shares the records themselves with the original. The fold
 * asks for a record through `writable` before it changes one in place: in a
 * fork, the first time a record still shared with the original is written,
 * the original's container gets a deep copy of it (same key, so the record
 * order is unchanged) and the fork keeps the object and changes it. So the
 * original keeps its content exactly, while anything the pass holds (a rule
 * looping over records it read before a unit was folded) sees every change,
 * as with a full copy. Records that the fold only adds, replaces or deletes
 * (commands, cooldowns, failures, endpoints, undeliverable commands) need
 * nothing more than the container copy. Outside a fork `writable` is a
 * plain lookup.
 *
 * Rule for the fold (replicas.ts, inventory.ts): a record of a container
 * listed in `forkFleet` that is changed in place while folding a
 * ReconcilePass is fetched with `writable`.
 */
import type { FleetState } from "./state.js";

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

/** A copy of `state` whose changes (through the fold) never reach `state`. */
export function forkFleet(state: FleetState): FleetState {
  const r = state.replicas;
  return {
    ...state,
    inventory: {
      ...state.inventory,
      nodes: fork(state.inventory.nodes),
      gateways: fork(state.inventory.gateways),
    },
    replicas: {
      ...r,
      replicas: fork(r.replicas),
      rollouts: fork(r.rollouts),
      autoscale: fork(r.autoscale),
      commands: shallowCopy(r.commands),
      undeliverable: shallowCopy(r.undeliverable),
      failures: shallowCopy(r.failures),
      cooldowns: shallowCopy(r.cooldowns),
      endpoints: shallowCopy(r.endpoints),
    },
  };
}

/**
 * The record under `id`, safe to change in place: if `rec` is a fork's
 * container still sharing it, the original's container gets a copy first.
 */
export function writable<T>(rec: Record<string, T>, id: string): T | undefined {
  const v = rec[id];
  if (v === undefined) return v;
  const origin = origins.get(rec);
  if (origin !== undefined && origin[id] === v) origin[id] = structuredClone(v);
  return v;
}

/** The container a fork's container was copied from, if `rec` is one. */
export function originOf<T>(rec: Record<string, T>): Record<string, T> | undefined {
  return origins.get(rec) as Record<string, T> | undefined;
}
