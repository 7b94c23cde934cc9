/**
 * Where a projection's snapshots are kept. A snapshot is the projection's
 * state after folding the log up to `seq`, so a restart folds only the rest.
 */

/** What names a projection for its snapshots. */
export interface ProjectionId {
  readonly name: string;
  readonly schemaVersion: number;
}

export interface SnapshotMeta {
  projection: string;
  schemaVersion: number;
  /** Last stream sequence the state covers. */
  seq: number;
  /** Stream time of the event at `seq` (ms; 0 when the state covers nothing). */
  timeMs: number;
  /** When the snapshot was written (wall clock, for operators only). */
  createdAtMs: number;
  /** Size of the canonical JSON of the state, bytes. */
  bytes: number;
}

export interface Snapshot<S> {
  meta: SnapshotMeta;
  state: S;
}

export interface LoadOptions {
  /** Only snapshots covering at most this sequence. */
  maxSeq?: number;
  /** Only snapshots whose last event was stored at or before this time (ms). */
  maxTimeMs?: number;
}

export interface SnapshotStore<S> {
  /**
   * The newest snapshot of the projection that this version can read and
   * that satisfies the bounds. Snapshots of another schema version and
   * unreadable ones are skipped (and reported), never misread; undefined
   * when none fits.
   */
  loadNewest(projection: ProjectionId, opts?: LoadOptions): Promise<Snapshot<S> | undefined>;
  /** Stores the state (already canonical JSON) as covering `seq`. */
  save(
    projection: ProjectionId,
    at: { seq: number; timeMs: number },
    canonicalState: string,
  ): Promise<SnapshotMeta>;
  /** Every stored snapshot of the projection (any schema version), oldest first. */
  list(projectionName: string): Promise<SnapshotMeta[]>;
}
