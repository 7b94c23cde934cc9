/**
 * What an archive holds, told by the names of its objects alone (so a
 * listing says everything and a half-written object never counts):
 *
 *   segments/<first seq>-<last seq>-<first time ms>-<last time ms>   (numbers zero-padded to 16 digits)
 *   snapshots/<seq>-<time ms>
 *
 * Pure: no I/O.
 */

export interface SegmentName {
  firstSeq: number;
  lastSeq: number;
  firstTimeMs: number;
  lastTimeMs: number;
}

export interface SnapshotName {
  seq: number;
  timeMs: number;
}

const pad = (n: number) => String(n).padStart(16, "0");

export const SEGMENT_DIR = "segments";
export const SNAPSHOT_DIR = "snapshots";

export function segmentName(s: SegmentName): string {
  return `${SEGMENT_DIR}/${pad(s.firstSeq)}-${pad(s.lastSeq)}-${pad(s.firstTimeMs)}-${pad(s.lastTimeMs)}`;
}

export function snapshotName(s: SnapshotName): string {
  return `${SNAPSHOT_DIR}/${pad(s.seq)}-${pad(s.timeMs)}`;
}

const SEGMENT = /^segments\/(\d{16})-(\d{16})-(\d{16})-(\d{16})$/;
const SNAPSHOT = /^snapshots\/(\d{16})-(\d{16})$/;

/** The segment a name stands for, or undefined for any other name. */
export function parseSegmentName(name: string): SegmentName | undefined {
  const m = SEGMENT.exec(name);
  if (!m) return undefined;
  const [firstSeq, lastSeq, firstTimeMs, lastTimeMs] = m.slice(1).map(Number) as [
    number,
    number,
    number,
    number,
  ];
  if (firstSeq < 1 || lastSeq < firstSeq) return undefined;
  return { firstSeq, lastSeq, firstTimeMs, lastTimeMs };
}

export function parseSnapshotName(name: string): SnapshotName | undefined {
  const m = SNAPSHOT.exec(name);
  if (!m) return undefined;
  return { seq: Number(m[1]), timeMs: Number(m[2]) };
}
