/**
 * One read of the log across the archive boundary: what the stream no
 * longer holds comes from the archive, the rest from the stream, in one
 * run of sequences. Every reader goes through here (`Log.read`,
 * `Log.readBatches`), so replay, the runtime, the API's history, explain
 * and what-if read the archive without knowing it.
 *
 * The archiver purges only what it has archived, so anything the stream
 * skips between the sequence a read expects next and the one it delivers
 * (it was purged while the read ran) is in the archive, and is read from
 * there before the stream's batch is handed over.
 */

import type { Event } from "../../gen/llmgw/v1/events_pb.js";
import { decodeEvent } from "../decode-event.js";
import { LogError, logErrorFrom } from "../errors.js";
import type { LogRecord, ReadOptions } from "../reader.js";
import type { Archive } from "./archive.js";

export interface StreamSide {
  read(opts: ReadOptions): AsyncGenerator<LogRecord[]>;
  /** The stream's first and last sequence now. */
  bounds(): Promise<{ firstSeq: number; lastSeq: number }>;
}

export async function* readAcrossArchive(
  archive: Archive,
  stream: StreamSide,
  opts: ReadOptions,
): AsyncGenerator<LogRecord[]> {
  const follow = opts.follow ?? false;
  const subjects = opts.subjects ?? [];
  let next = Math.max(1, opts.fromSeq ?? 1);
  let fromTimeMs = opts.fromTimeMs;
  const bounds = await stream.bounds();
  const end = opts.untilSeq ?? (follow ? Number.POSITIVE_INFINITY : bounds.lastSeq);

  const fromArchive = async function* (from: number, until: number): AsyncGenerator<LogRecord[]> {
    for await (const raw of archive.read({ fromSeq: from, untilSeq: until, subjects })) {
      if (opts.signal?.aborted) return;
      let out: LogRecord[] = [];
      for (const r of raw) {
        let event: Event;
        try {
          event = decodeEvent(r.data, r.seq);
        } catch (err) {
          const e = logErrorFrom(err);
          if (out.length > 0) yield out;
          out = [];
          if (!opts.onMalformed) throw e;
          opts.onMalformed(e, { seq: r.seq, subject: r.subject, data: r.data });
          continue;
        }
        out.push({ seq: r.seq, timeMs: r.timeMs, subject: r.subject, event });
      }
      if (out.length > 0) yield out;
    }
  };

  // The part of the log the stream no longer holds.
  if (next < bounds.firstSeq || (fromTimeMs !== undefined && bounds.firstSeq > 1)) {
    const extent = await archive.extent({ fresh: true });
    if (extent && fromTimeMs !== undefined) {
      const at = await archive.seqAtOrAfter(fromTimeMs);
      if (at !== undefined) {
        next = at;
        fromTimeMs = undefined;
      }
    }
    if (fromTimeMs === undefined) {
      // What lies before the stream's start must be in the archive: a reader pointed at another
      // archive (or none) must not pass over history silently. What lies before the archive's own
      // start was removed before anything was archived, and is gone everywhere.
      const missingFrom = Math.max(next, extent ? extent.lastSeq + 1 : next);
      const missingTo = Math.min(end, bounds.firstSeq - 1);
      if (missingFrom <= missingTo) {
        throw new LogError(
          "not-found",
          `the stream starts at ${bounds.firstSeq}, and sequences ${missingFrom}…${missingTo} are not in the archive (${archive.where}, ${extent ? `ending at ${extent.lastSeq}` : "empty"}): read with the --archive the archiver writes to`,
        );
      }
    }
    if (extent && fromTimeMs === undefined && next <= extent.lastSeq && next < bounds.firstSeq) {
      const until = Math.min(end, extent.lastSeq);
      if (next <= until) yield* fromArchive(next, until);
      next = Math.max(next, until + 1);
    }
  }
  if (next > end || opts.signal?.aborted) return;

  // The stream, filling from the archive whatever it skips (purged during the read).
  const fill = async function* (before: number): AsyncGenerator<LogRecord[]> {
    // An unfiltered read skipping sequences is certain to need the archive: list it anew.
    const extent = await archive.extent({ fresh: subjects.length === 0 });
    if (!extent || next > extent.lastSeq) return;
    const { firstSeq } = await stream.bounds();
    const until = Math.min(before - 1, extent.lastSeq, firstSeq - 1);
    if (next <= until) yield* fromArchive(next, until);
  };
  const streamOpts: ReadOptions = { ...opts, fromSeq: next };
  if (fromTimeMs === undefined) delete streamOpts.fromTimeMs;
  else streamOpts.fromTimeMs = fromTimeMs;
  for await (const batch of stream.read(streamOpts)) {
    const first = batch[0];
    if (first && fromTimeMs === undefined && first.seq > next) yield* fill(first.seq);
    yield batch;
    const last = batch.at(-1);
    if (last) next = last.seq + 1;
    fromTimeMs = undefined;
  }
  if (!follow && fromTimeMs === undefined && next <= end && !opts.signal?.aborted) {
    yield* fill(Number.isFinite(end) ? end + 1 : Number.MAX_SAFE_INTEGER);
  }
}
