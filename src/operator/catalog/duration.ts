/**
 * Deadlines in the catalog file are written with a unit ("90s", "20m",
 * "1h30m"): a bare number invites seconds-versus-milliseconds mistakes, and
 * a ready timeout off by a factor of 1,000 fails every large model.
 */

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h)/gy;
/** The longest deadline a profile may set (it travels as uint32 milliseconds). */
export const MAX_DURATION_MS = 24 * 3_600_000;

/** Milliseconds for a duration like "90s", "20m" or "1h30m", or an error message naming what is wrong. */
export function parseDuration(text: string): { ms: number } | { error: string } {
  const bad = { error: `expected a duration like "90s", "20m" or "1h30m", got ${JSON.stringify(text)}` };
  const t = text.trim();
  if (t === "") return bad;
  PART.lastIndex = 0;
  let ms = 0;
  let end = 0;
  for (let m = PART.exec(t); m !== null; m = PART.exec(t)) {
    ms += Number(m[1]) * (UNITS[m[2] as string] as number);
    end = PART.lastIndex;
  }
  if (end !== t.length) return bad;
  if (!Number.isInteger(ms))
    return { error: `${JSON.stringify(text)} is not a whole number of milliseconds` };
  if (ms <= 0) return { error: `a duration must be positive, got ${JSON.stringify(text)}` };
  if (ms > MAX_DURATION_MS) return { error: `${JSON.stringify(text)} is longer than 24h` };
  return { ms };
}

/** The catalog file's spelling of a duration in ms: the largest unit that divides it. */
export function formatDuration(ms: number): string {
  for (const [unit, f] of [
    ["h", 3_600_000],
    ["m", 60_000],
    ["s", 1000],
  ] as const)
    if (ms % f === 0) return `${ms / f}${unit}`;
  return `${ms}ms`;
}
