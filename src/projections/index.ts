// Projections: pure folds of the log. Everything public is named here.

export { effectiveReplicas, LOAD_HISTORY_MS, LOAD_SAMPLES_MAX } from "./autoscale.js";
export { invalidMinAvailableReason, resolveMinAvailable } from "./budget.js";
export { AUTOSCALE_DEFAULTS } from "./convert.js";
export type { DeepReadonly } from "./deep-readonly.js";
export { replicaEndpoint, routingTable } from "./endpoints.js";
export {
  cloneFleet,
  evolveFleet,
  FLEET_SCHEMA_VERSION,
  fleetProjection,
  foldFleet,
  initialFleet,
  reviveFleet,
} from "./fleet.js";
export {
  drainingNode,
  gpuTroubleNode,
  NODE_INDEXES,
  REPLICA_INDEXES,
  replicaClass,
  sessionlessNode,
  shardKey,
  shardOwners,
  unadoptedNode,
} from "./fleet-indexes.js";
export { type Fork, forkFleet } from "./fork.js";
export { evolveInventory, initialInventory, isCurrentSession } from "./inventory.js";
export { isReady } from "./is-ready.js";
export { PatchedSortedList, type SortedSource } from "./patched-sorted-list.js";
export type { EventMeta, Projection } from "./projection.js";
export { type FleetFilter, filterFleet, type GpuShard, shardsByGpu } from "./query.js";
export { readyCounts } from "./ready.js";
export {
  type ChangeFollower,
  type Group,
  type GroupIndex,
  type LookupIndex,
  RecordTable,
  sameKeys,
  type TableIndexes,
  type TableView,
} from "./record-table.js";
export { evolveReplicas, failureReasonName, initialReplicas } from "./replicas.js";
export { fnv1a32, modelRevision, profileRevision } from "./revision.js";
export { staleRevision } from "./rollouts.js";
export { canonicalJson, canonicallyEqual } from "./serialize.js";
export * from "./state.js";
