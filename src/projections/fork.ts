/**
 * A working copy of the fleet that costs what it changes. A reconcile pass
 * folds its own decisions into a working state as it goes (so later rules
 * see earlier ones' effect) and must leave the state it was given as it
 * was. Cloning the whole fleet for that made every pass cost the size of
 * the fleet; so did copying the two big containers, nodes and replicas
 * (about 4 ms each at 10,000 records, most of a pass that changes one).
 *
 * So a fork shares the node and replica tables with the original, forked
 * (`RecordTable.fork`): they journal the pass's writes, and `release` gives
 * them back as they were (record-table.ts). While a fork is in use its
 * original's tables are the fork's: nothing may read the original then (a
 * pass is synchronous, and the fork is released when it ends).
 *
 * The small containers (gateways, rollouts, autoscale, commands, cooldowns,
 * failures, endpoints, undeliverable commands) are copied; the fold only
 * adds, replaces or deletes their records, never changes one in place, so a
 * copy of the container is all the original needs.
 */
import { RecordTable } from "./record-table.js";
import type { FleetState, FleetView, ReplicaState } from "./state.js";

/** A working copy of the fleet: fold into `state`, then `release` once. */
export interface Fork {
  readonly state: FleetState;
  /** Gives the original back exactly what it held. Call once, when done with the fork. */
  release(): void;
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

/**
 * A fork of `state` (see above). A reader's view is enough: the fork is the
 * one writable copy a reader may have, and what it writes is given back.
 */
export function forkFleet(state: FleetView): Fork {
  const r = state.replicas;
  const nodes = RecordTable.fork(state.inventory.nodes);
  let replicas: RecordTable<ReplicaState>;
  try {
    replicas = RecordTable.fork(r.replicas);
  } catch (err) {
    nodes.release();
    throw err;
  }
  const work: FleetState = {
    ...state,
    inventory: { nodes, gateways: shallowCopy(state.inventory.gateways) },
    replicas: {
      ...r,
      replicas,
      catalog: r.catalog,
      rollouts: shallowCopy(r.rollouts),
      autoscale: shallowCopy(r.autoscale),
      commands: shallowCopy(r.commands),
      undeliverable: shallowCopy(r.undeliverable),
      failures: shallowCopy(r.failures),
      cooldowns: shallowCopy(r.cooldowns),
      endpoints: shallowCopy(r.endpoints),
      ...(r.refusedResults ? { refusedResults: shallowCopy(r.refusedResults) } : {}),
    },
  };
  let released = false;
  return {
    state: work,
    release() {
      if (released) return;
      released = true;
      nodes.release();
      replicas.release();
    },
  };
}
