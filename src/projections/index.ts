// Projections: pure folds of the log. Everything public is named here.

export { effectiveReplicas, LOAD_HISTORY_MS, LOAD_SAMPLES_MAX } from "./autoscale.js";
export { invalidMinAvailableReason, resolveMinAvailable } from "./budget.js";
export { AUTOSCALE_DEFAULTS } from "./convert.js";
export { replicaEndpoint, routingTable, sameEndpoints } from "./endpoints.js";
export { evolveFleet, FLEET_SCHEMA_VERSION, fleetProjection, foldFleet, initialFleet } from "./fleet.js";
export { type Fork, forkFleet, originOf } from "./fork.js";
export { evolveInventory, initialInventory, isCurrentSession } from "./inventory.js";
export type { EventMeta, Projection } from "./projection.js";
export { type FleetFilter, filterFleet, type GpuShard, shardsByGpu } from "./query.js";
export { isReady, readyCounts } from "./ready.js";
export {
  type ChangeFollower,
  followChanges,
  type Group,
  type GroupKey,
  groupIds,
  groupsOf,
  verifyIndexes,
} from "./record-index.js";
export { evolveReplicas, failureReasonName, initialReplicas } from "./replicas.js";
export { fnv1a32, modelRevision, profileRevision } from "./revision.js";
export { staleRevision } from "./rollouts.js";
export { canonicalJson } from "./serialize.js";
export { recordValues, sameKeys, sortedKeys } from "./sorted-keys.js";
export * from "./state.js";
