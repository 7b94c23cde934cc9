/**
 * The log's archive: sealed segments of the stream (in sequence order,
 * without gaps) and the projection snapshots written at their boundaries,
 * in an `ArchiveStore`. Everything is told by object names (names.ts), so
 * the extent is a listing away and an object counts only once whole.
 */
import { LogError } from "../errors.js";
import {
  parseSegmentName,
  parseSnapshotName,
  SEGMENT_DIR,
  type SegmentName,
  SNAPSHOT_DIR,
  type SnapshotName,
  segmentName,
  snapshotName,
} from "./names.js";
import { decodeSegment, encodeSegment, type RawRecord } from "./segment.js";
import type { ArchiveStore } from "./store.js";
import { subjectMatches } from "./subject-match.js";

export interface ArchivedSegment extends SegmentName {
  name: string;
  bytes: number;
}

export interface ArchivedSnapshot extends SnapshotName {
  name: string;
  bytes: number;
}

export interface ArchiveExtent {
  firstSeq: number;
  lastSeq: number;
  /** Bytes of the segments. */
  bytes: number;
}

export interface ArchiveReadOptions {
  fromSeq: number;
  untilSeq: number;
  /** Only these subjects (wildcards allowed); empty: every one. */
  subjects?: readonly string[];
}

/** Decoded segments kept in memory: a time slider's jumps read their neighbours next. */
const KEPT_SEGMENTS = 4;
/** How long a listing is trusted before it is taken again. */
const LISTING_TTL_MS = 1_000;

export class Archive {
  #listed: { at: number; segments: ArchivedSegment[] } | undefined;
  readonly #kept = new Map<string, RawRecord[]>();

  constructor(readonly store: ArchiveStore) {}

  get where(): string {
    return this.store.where;
  }

  /**
   * The segments, oldest first. Overlapping ones (which a correct archiver
   * never writes) and a gap in the run are refused as damage, never
   * passed over: a reader must not silently miss history.
   */
  async segments(opts: { fresh?: boolean } = {}): Promise<ArchivedSegment[]> {
    const now = Date.now();
    if (!opts.fresh && this.#listed && now - this.#listed.at < LISTING_TTL_MS) return this.#listed.segments;
    const segments: ArchivedSegment[] = [];
    for (const o of await this.store.list(SEGMENT_DIR)) {
      const s = parseSegmentName(o.name);
      if (s) segments.push({ ...s, name: o.name, bytes: o.bytes });
    }
    segments.sort((a, b) => a.firstSeq - b.firstSeq);
    for (let i = 1; i < segments.length; i++) {
      const prev = segments[i - 1] as ArchivedSegment;
      const cur = segments[i] as ArchivedSegment;
      if (cur.firstSeq !== prev.lastSeq + 1) {
        throw new LogError(
          "malformed",
          `the archive in ${this.where} is not one run: ${prev.name} is followed by ${cur.name}`,
        );
      }
    }
    this.#listed = { at: now, segments };
    return segments;
  }

  /** First and last archived sequence and the segments' bytes; undefined when nothing is archived. */
  async extent(opts: { fresh?: boolean } = {}): Promise<ArchiveExtent | undefined> {
    const segments = await this.segments(opts);
    const first = segments[0];
    const last = segments.at(-1);
    if (!first || !last) return undefined;
    return {
      firstSeq: first.firstSeq,
      lastSeq: last.lastSeq,
      bytes: segments.reduce((n, s) => n + s.bytes, 0),
    };
  }

  async snapshots(): Promise<ArchivedSnapshot[]> {
    const out: ArchivedSnapshot[] = [];
    for (const o of await this.store.list(SNAPSHOT_DIR)) {
      const s = parseSnapshotName(o.name);
      if (s) out.push({ ...s, name: o.name, bytes: o.bytes });
    }
    return out.sort((a, b) => a.seq - b.seq);
  }

  /** The records of one segment, checked to be exactly its run of sequences. */
  async readSegment(seg: ArchivedSegment): Promise<RawRecord[]> {
    const kept = this.#kept.get(seg.name);
    if (kept) {
      this.#kept.delete(seg.name);
      this.#kept.set(seg.name, kept);
      return kept;
    }
    const bytes = await this.store.get(seg.name);
    if (!bytes)
      throw new LogError(
        "not-found",
        `archive segment ${seg.name} is listed in ${this.where} but cannot be read`,
      );
    const records = decodeSegment(bytes, seg.name);
    const count = seg.lastSeq - seg.firstSeq + 1;
    if (records.length !== count || records.some((r, i) => r.seq !== seg.firstSeq + i)) {
      throw new LogError(
        "malformed",
        `archive segment ${seg.name} does not hold sequences ${seg.firstSeq}…${seg.lastSeq} in order`,
      );
    }
    this.#kept.set(seg.name, records);
    if (this.#kept.size > KEPT_SEGMENTS) this.#kept.delete(this.#kept.keys().next().value as string);
    return records;
  }

  /** Archived records from `fromSeq` to `untilSeq` (those the archive holds), one batch per segment. */
  async *read(opts: ArchiveReadOptions): AsyncGenerator<RawRecord[]> {
    const subjects = opts.subjects ?? [];
    for (const seg of await this.segments()) {
      if (seg.lastSeq < opts.fromSeq) continue;
      if (seg.firstSeq > opts.untilSeq) return;
      const records = await this.readSegment(seg);
      const out = records.filter(
        (r) =>
          r.seq >= opts.fromSeq &&
          r.seq <= opts.untilSeq &&
          (subjects.length === 0 || subjects.some((f) => subjectMatches(f, r.subject))),
      );
      if (out.length > 0) yield out;
    }
  }

  /** The first archived sequence stored at or after `timeMs`; undefined when the archive ends before it. */
  async seqAtOrAfter(timeMs: number): Promise<number | undefined> {
    for (const seg of await this.segments()) {
      if (seg.lastTimeMs < timeMs) continue;
      for (const r of await this.readSegment(seg)) if (r.timeMs >= timeMs) return r.seq;
    }
    return undefined;
  }

  /**
   * Archives `records` (a run of sequences in order) as one segment. A
   * segment with the same first sequence already there (a restarted
   * archiver sealing again what it had sealed before it died) is left as
   * it is: nothing is archived twice.
   */
  async writeSegment(records: readonly RawRecord[]): Promise<{ segment: SegmentName; written: boolean }> {
    const first = records[0];
    const last = records.at(-1);
    if (!first || !last)
      throw new LogError("invalid-argument", "an archive segment needs at least one record");
    const segment = {
      firstSeq: first.seq,
      lastSeq: last.seq,
      firstTimeMs: first.timeMs,
      lastTimeMs: last.timeMs,
    };
    const existing = (await this.segments({ fresh: true })).find((s) => s.firstSeq === first.seq);
    if (existing) return { segment: existing, written: false };
    const end = (await this.extent())?.lastSeq;
    if (end !== undefined && first.seq !== end + 1) {
      throw new LogError(
        "invalid-argument",
        `segment ${first.seq}…${last.seq} does not follow the archive, which ends at ${end}`,
      );
    }
    await this.store.put(segmentName(segment), encodeSegment(records));
    this.#listed = undefined;
    return { segment, written: true };
  }

  async writeSnapshot(at: SnapshotName, bytes: Uint8Array): Promise<void> {
    await this.store.put(snapshotName(at), bytes);
  }

  async readSnapshot(s: ArchivedSnapshot): Promise<Uint8Array | undefined> {
    return this.store.get(s.name);
  }

  close(): Promise<void> {
    return this.store.close();
  }
}
