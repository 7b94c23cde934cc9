/** The fleet projection: inventory and replicas folded together from one log. */
import type { Event } from "../gen/llmgw/v1/events_pb.js";
import { NODE_INDEXES, REPLICA_INDEXES } from "./fleet-indexes.js";
import { evolveInventory, initialInventory } from "./inventory.js";
import type { EventMeta, Projection } from "./projection.js";
import { RecordTable } from "./record-table.js";
import { evolveReplicas, initialReplicas } from "./replicas.js";
import { namesReservedKey } from "./reserved.js";
import type { FleetJson, FleetState, FleetView } from "./state.js";

/**
 * Bumped whenever the state's shape or meaning changes, so older snapshots
 * are refolded rather than misread:
 * 2 — stop/drain commands of a pass that also removes or fails their replica
 *     keep the replica's id (1 recorded "");
 * 3 — sessions record adoptionSeq;
 * 4 — replicas record when their drain started (drainStartedMs);
 * 5 — commands of a session that ended (closed, superseded or expired) are
 *     dropped rather than kept for ever;
 * 6 — shards record lifecycle facts (fault, start attempts and due time,
 *     STARTING since, last output), replicas their last failure, profiles
 *     their deadline overrides; failures count from ReplicaFailed decisions;
 *     commands a gateway reported undeliverable wait in `undeliverable`
 *     until a pass handles them; a restated drain keeps its start time;
 * 7 — shards record their endpoint, replicas state the routing table;
 * 8 — GPUs record faults reported by heartbeats and operator cordons;
 * 9 — nodes record their advertised address, profiles their engine;
 * 10 — profiles and models record their spec revision, models their
 *     rollout policy, disruption budget (minAvailable, only when set) and
 *     autoscale setting; replicas the revision they were placed with, when
 *     they were created and the DisruptionBlocked wait in force (only when
 *     set); shards their last reported load; `rollouts` and `autoscale`
 *     (the autoscale decisions) per model.
 */
export const FLEET_SCHEMA_VERSION = 10;

export function initialFleet(): FleetState {
  return { seq: 0, timeMs: 0, inventory: initialInventory(), replicas: initialReplicas() };
}

export function evolveFleet(state: FleetState, event: Event, meta: EventMeta): FleetState {
  if (namesReservedKey(event)) {
    state.seq = meta.seq;
    state.timeMs = meta.timeMs;
    return state;
  }
  // Replicas first: they judge "current session" by the inventory before this event.
  state.replicas = evolveReplicas(state.replicas, event, meta, state.inventory);
  state.inventory = evolveInventory(state.inventory, event, meta);
  state.seq = meta.seq;
  state.timeMs = meta.timeMs;
  return state;
}

/**
 * The state whose JSON form is `json` (a parsed snapshot, or a copy's
 * plain form): the node and replica records into tables of their own.
 * Takes the objects it is given (no copy).
 */
export function reviveFleet(json: unknown): FleetState {
  const plain = json as FleetJson;
  return {
    ...plain,
    inventory: { ...plain.inventory, nodes: new RecordTable(NODE_INDEXES, plain.inventory.nodes) },
    replicas: { ...plain.replicas, replicas: new RecordTable(REPLICA_INDEXES, plain.replicas.replicas) },
  };
}

/** A deep copy of `state`, sharing nothing with it (the history, a filtered view, tests). */
export function cloneFleet(state: FleetView): FleetState {
  const plain = {
    ...state,
    inventory: { ...state.inventory, nodes: state.inventory.nodes.toJSON() },
    replicas: { ...state.replicas, replicas: state.replicas.replicas.toJSON() },
  };
  return reviveFleet(structuredClone(plain));
}

export const fleetProjection: Projection<FleetState> = {
  name: "fleet",
  schemaVersion: FLEET_SCHEMA_VERSION,
  initialState: initialFleet,
  evolve: evolveFleet,
  revive: reviveFleet,
};

/** Folds a list of events from the initial state (tests, replay of a fixture). */
export function foldFleet(records: Iterable<{ event: Event; seq: number; timeMs: number }>): FleetState {
  let s = initialFleet();
  for (const r of records) s = evolveFleet(s, r.event, { seq: r.seq, timeMs: r.timeMs });
  return s;
}
