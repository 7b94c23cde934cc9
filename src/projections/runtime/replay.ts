/**
 * Replay: the state of a projection at a point of the log, folded from the
 * start or from the nearest earlier snapshot. The same code path as the
 * runtime's fold, without following.
 */
import type { Log, LogError, RefusedEvent } from "../../log/index.js";
import type { Projection } from "../projection.js";
import { loadNearestSnapshot } from "./archive-snapshots.js";
import type { SnapshotMeta, SnapshotStore } from "./snapshot-store.js";

export interface ReplayOptions<S> {
  /** Fold up to and including this sequence (default: the stream's last). */
  untilSeq?: number;
  /** Fold events stored at or before this time (ms since the epoch). */
  untilTimeMs?: number;
  /** Start from the nearest earlier snapshot in this store or the archive's (see `archiveSnapshots`). */
  snapshots?: SnapshotStore<S>;
  /**
   * Also start from the archive's snapshots (default true). With false and
   * no `snapshots`, the whole log is folded from its first event.
   */
  archiveSnapshots?: boolean;
  /** Called every `progressEvery` events (default 5000) and once at the end. */
  onProgress?: (p: ReplayProgress) => void;
  progressEvery?: number;
  /** Malformed messages are passed over and reported here (by sequence). */
  onMalformed?: (err: LogError) => void;
  /** Events on a subject their kind may not be written to: never folded, reported here (by sequence). */
  onRefused?: (refused: RefusedEvent) => void;
  signal?: AbortSignal;
}

export interface ReplayProgress {
  /** Events folded so far (not counting the snapshot). */
  folded: number;
  seq: number;
  /** Where the fold started (the snapshot's sequence or 0) and where it will end at most. */
  fromSeq: number;
  targetSeq: number;
}

export interface ReplayResult<S> {
  state: S;
  /** Last sequence folded (0: nothing). */
  seq: number;
  /** Stream time of that event (ms; 0: nothing). */
  timeMs: number;
  folded: number;
  /** The snapshot the fold started from, if any. */
  snapshot: SnapshotMeta | undefined;
  /** The stream's last sequence when the replay started. */
  streamLastSeq: number;
  malformedSeqs: number[];
  /** Events passed over because their subject may not carry their kind (src/log/subject-kinds.ts). */
  refusedSeqs: number[];
  /**
   * Events of a kind this version does not know (a newer version wrote
   * them): folded as no-ops and counted, never an error (docs/upgrades.md).
   */
  unknownKinds: number;
}

export async function replay<S>(
  log: Log,
  projection: Projection<S>,
  opts: ReplayOptions<S> = {},
): Promise<ReplayResult<S>> {
  const streamLastSeq = await log.lastSeq();
  const targetSeq = Math.min(opts.untilSeq ?? streamLastSeq, streamLastSeq);
  const bounds = {
    maxSeq: targetSeq,
    ...(opts.untilTimeMs === undefined ? {} : { maxTimeMs: opts.untilTimeMs }),
  };
  const stored =
    opts.archiveSnapshots === false
      ? await opts.snapshots?.loadNewest(projection, bounds)
      : await loadNearestSnapshot(log, projection, opts.snapshots, bounds);
  // A store gives the state as stored (JSON); loadNearestSnapshot revived it already.
  const snap =
    stored && opts.archiveSnapshots === false
      ? { meta: stored.meta, state: projection.revive(stored.state) }
      : stored;
  let state = snap ? snap.state : projection.initialState();
  let seq = snap?.meta.seq ?? 0;
  let timeMs = snap?.meta.timeMs ?? 0;
  const fromSeq = seq;
  let folded = 0;
  let unknownKinds = 0;
  const malformedSeqs: number[] = [];
  const refusedSeqs: number[] = [];
  const every = Math.max(1, opts.progressEvery ?? 5000);
  const progress = () => opts.onProgress?.({ folded, seq, fromSeq, targetSeq });

  if (targetSeq > seq && !opts.signal?.aborted) {
    reading: for await (const batch of log.readBatches({
      fromSeq: seq + 1,
      untilSeq: targetSeq,
      ...(opts.signal ? { signal: opts.signal } : {}),
      onMalformed: (err) => {
        if (err.seq !== undefined) malformedSeqs.push(err.seq);
        opts.onMalformed?.(err);
      },
      onRefused: (r) => {
        if (opts.untilTimeMs !== undefined && r.timeMs > opts.untilTimeMs) return;
        refusedSeqs.push(r.seq);
        opts.onRefused?.(r);
      },
    })) {
      for (const r of batch) {
        if (opts.untilTimeMs !== undefined && r.timeMs > opts.untilTimeMs) break reading;
        if (r.event.body.case === undefined) unknownKinds++;
        state = projection.evolve(state, r.event, r);
        seq = r.seq;
        timeMs = r.timeMs;
        folded++;
        if (folded % every === 0) progress();
      }
    }
  }
  progress();
  return {
    state,
    seq,
    timeMs,
    folded,
    snapshot: snap?.meta,
    streamLastSeq,
    malformedSeqs,
    refusedSeqs,
    unknownKinds,
  };
}
