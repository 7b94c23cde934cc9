/**
 * What the archiver decides, as pure functions: when the open segment is
 * sealed, and how far the stream may be purged. Nothing leaves the stream
 * before it is archived: the purge bound never passes the archive's end.
 */

export interface RetentionConfig {
  /** Events older than this leave the stream once archived; 0: no age limit. */
  maxAgeMs: number;
  /** The stream is kept under this many bytes by purging archived segments; 0: no size limit. */
  maxBytes: number;
  /** A segment is sealed at this many bytes of messages… */
  segmentBytes: number;
  /** …or once its oldest message is this old, whichever comes first. */
  sealAfterMs: number;
}

/** A sealed segment is this fraction of the retention age at most, so a quiet log is archived too. */
export const SEAL_FRACTION = 1 / 4;
/** Without an age limit, a segment is sealed at the latest after this long. */
export const DEFAULT_SEAL_AFTER_MS = 3_600_000;
/** 8 MiB: about a minute of a 10,000-node fleet's log, and a size every store takes in one put. */
export const DEFAULT_SEGMENT_BYTES = 8 * 1024 * 1024;

/** The seal age for a retention age: a fraction of it, so the stream holds at most that much unarchived. */
export function sealAfterFor(maxAgeMs: number): number {
  return maxAgeMs > 0 ? Math.max(1_000, Math.floor(maxAgeMs * SEAL_FRACTION)) : DEFAULT_SEAL_AFTER_MS;
}

/** Whether the open segment (its bytes and its oldest message's stream time) is due to be sealed now. */
export function sealDue(
  open: { bytes: number; oldestTimeMs: number | undefined },
  cfg: Pick<RetentionConfig, "segmentBytes" | "sealAfterMs">,
  nowMs: number,
): boolean {
  if (open.oldestTimeMs === undefined) return false;
  return open.bytes >= cfg.segmentBytes || nowMs - open.oldestTimeMs >= cfg.sealAfterMs;
}

export interface PurgeSegment {
  firstSeq: number;
  lastSeq: number;
  lastTimeMs: number;
  bytes: number;
}

/**
 * The first sequence the stream should keep: past every archived segment
 * (oldest first) that is older than the age limit, or whose removal the
 * size limit still needs. Never past the last archived sequence + 1.
 * Returns `stream.firstSeq` when nothing is to go.
 */
export function purgeBound(
  segments: readonly PurgeSegment[],
  stream: { firstSeq: number; bytes: number },
  cfg: Pick<RetentionConfig, "maxAgeMs" | "maxBytes">,
  nowMs: number,
): number {
  let keepFrom = stream.firstSeq;
  let bytes = stream.bytes;
  for (const s of segments) {
    if (s.lastSeq < keepFrom) continue;
    const old = cfg.maxAgeMs > 0 && nowMs - s.lastTimeMs > cfg.maxAgeMs;
    const over = cfg.maxBytes > 0 && bytes > cfg.maxBytes;
    if (!old && !over) break;
    keepFrom = s.lastSeq + 1;
    bytes -= s.bytes;
  }
  return keepFrom;
}

const DURATION = /^(\d+)(ms|s|m|h|d)$/;
const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Milliseconds of "20s", "36h", "7d" (one number, one unit; "0" for none), or an error naming the form. */
export function parseRetentionAge(text: string): { ms: number } | { error: string } {
  const t = text.trim();
  if (t === "0") return { ms: 0 };
  const m = DURATION.exec(t);
  if (!m)
    return {
      error: `expected a duration like 20s, 90m, 36h or 7d (or 0 for none), got ${JSON.stringify(text)}`,
    };
  return { ms: Number(m[1]) * (DURATION_UNITS[m[2] as string] as number) };
}

const SIZE = /^(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)?$/i;
const SIZE_UNITS: Record<string, number> = {
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
  tib: 1024 ** 4,
};

/** Bytes of "500MB", "20GiB", "1048576" (0 for none), or an error naming the form. */
export function parseSize(text: string): { bytes: number } | { error: string } {
  const m = SIZE.exec(text.trim());
  if (!m)
    return {
      error: `expected a size like 512MiB, 20GiB or 1000000 (bytes; 0 for none), got ${JSON.stringify(text)}`,
    };
  return { bytes: Math.floor(Number(m[1]) * (SIZE_UNITS[(m[2] ?? "b").toLowerCase()] as number)) };
}
