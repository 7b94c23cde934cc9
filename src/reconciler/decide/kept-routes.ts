/**
 * The routing table as the replica records have it now, per model, kept
 * across passes: the rows (`Endpoint` messages, sorted by replica id) of
 * the ready replicas with an endpoint. Building a model's table from its
 * replicas reads every ready replica of it (a model of 16,000: about 5 ms,
 * mostly cache misses on the records); kept, a pass pays for the replicas
 * that changed.
 *
 * How it stays exact: it follows the change marks of the replica table
 * (projections/record-table.ts), which the fold, a pass's fork and its
 * release all make, and re-reads the marked replicas before it answers. A
 * row is made once per change of its replica and shared by every table
 * array that holds it; an array is never changed once handed out (a model
 * that changed gets a new one). Readiness and a replica's endpoint come
 * from the replica alone (`isReady`, `replicaEndpoint`). Derived data kept
 * beside the table (keyed by it), never in the state.
 */
import type { Endpoint } from "../../gen/llmgw/v1/events_pb.js";
import { EndpointSchema } from "../../gen/llmgw/v1/events_pb.js";
import {
  type ChangeFollower,
  type EndpointEntry,
  type FleetView,
  isReady,
  PatchedSortedList,
  type ReplicaState,
  replicaEndpoint,
  routingTable,
  type TableView,
} from "../../projections/index.js";

type Replicas = TableView<ReplicaState>;

const ENDPOINT = EndpointSchema.typeName as Endpoint["$typeName"];

interface ModelRows {
  /** Replica id → its row. */
  readonly rows: Map<string, Endpoint>;
  /** The rows sorted by replica id, patched after a few changes rather than sorted again. */
  readonly sorted: PatchedSortedList<Endpoint>;
}

function modelRows(): ModelRows {
  const rows = new Map<string, Endpoint>();
  const sorted = new PatchedSortedList<Endpoint>({
    current: (id) => rows.get(id),
    all: () => rows.values(),
    keyOf: (row) => row.replicaId,
  });
  return { rows, sorted };
}

export class KeptRoutes {
  readonly #changes: ChangeFollower;
  /** Replica id → the model its row is under. */
  readonly #modelOf = new Map<string, string>();
  readonly #models = new Map<string, ModelRows>();

  constructor(readonly records: Replicas) {
    // Followed first: a mark made from here on is taken by the next sync.
    this.#changes = records.followChanges();
    for (const id of records.sortedKeys()) this.#read(id);
  }

  /** Each model's table now (rows sorted by replica id; shared: never change them). Models without rows are absent. */
  tables(): Map<string, readonly Endpoint[]> {
    for (const id of this.#changes.take()) this.#read(id);
    const out = new Map<string, readonly Endpoint[]>();
    for (const [model, m] of this.#models) {
      if (m.rows.size === 0) continue;
      out.set(model, m.sorted.sorted());
    }
    return out;
  }

  stop(): void {
    this.#changes.stop();
  }

  #read(id: string): void {
    const r = this.records.get(id);
    const e = r !== undefined && isReady(r) ? replicaEndpoint(r) : null;
    const was = this.#modelOf.get(id);
    if (was !== undefined) {
      const m = this.#models.get(was) as ModelRows;
      const row = m.rows.get(id) as Endpoint;
      if (e !== null && was === r?.model && row.url === e.url && row.nodeId === e.nodeId) return;
      m.rows.delete(id);
      this.#modelOf.delete(id);
      m.sorted.note(id);
    }
    if (e === null || r === undefined) return;
    let m = this.#models.get(r.model);
    if (m === undefined) {
      m = modelRows();
      this.#models.set(r.model, m);
    }
    m.rows.set(id, { $typeName: ENDPOINT, replicaId: e.replicaId, url: e.url, nodeId: e.nodeId });
    this.#modelOf.set(id, r.model);
    m.sorted.note(id);
  }
}

/** The kept tables of each replica table (derived data beside it). */
const kept = new WeakMap<Replicas, KeptRoutes>();

/** The routing table per model as `records` has it now (kept across passes). */
export function routingRows(records: Replicas): Map<string, readonly Endpoint[]> {
  let k = kept.get(records);
  if (k === undefined) {
    k = new KeptRoutes(records);
    kept.set(records, k);
  }
  return k.tables();
}

/**
 * For tests: throws unless the kept tables of `state`'s replicas (when
 * kept) are the routing table the projection defines (`routingTable`, a
 * build from every record).
 */
export function verifyKeptRoutes(state: FleetView): void {
  const k = kept.get(state.replicas.replicas);
  if (k === undefined) return;
  const text = (t: Iterable<[string, readonly EndpointEntry[]]>) =>
    [...t]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([m, rows]) => `${m}: ${rows.map((r) => `${r.replicaId}@${r.url}@${r.nodeId}`).join(" ")}`)
      .join("\n");
  if (text(k.tables()) !== text(Object.entries(routingTable(state))))
    throw new Error("the kept routing table is stale");
}
