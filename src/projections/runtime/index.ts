// The projection runtime: follows the log, folds, snapshots. Everything public is named here.
export { ArchiveSnapshotStore, encodeArchiveSnapshot, loadNearestSnapshot } from "./archive-snapshots.js";
export { isProjectionError, ProjectionError, type ProjectionErrorCode } from "./errors.js";
export {
  DEFAULT_SNAPSHOT_BUCKET,
  type KvSnapshotOptions,
  KvSnapshotStore,
  openKvSnapshotStore,
} from "./kv-snapshots.js";
export { type ProjectionMetrics, projectionMetrics } from "./metrics.js";
export { type CaughtUp, caughtUp, type FollowingProjection } from "./readiness.js";
export { type ReplayOptions, type ReplayProgress, type ReplayResult, replay } from "./replay.js";
export { ProjectionRuntime, type ProjectionRuntimeOptions, type RuntimeStatus } from "./runtime.js";
export type { LoadOptions, ProjectionId, Snapshot, SnapshotMeta, SnapshotStore } from "./snapshot-store.js";
