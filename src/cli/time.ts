import { CliError } from "./common.js";

/**
 * Parses a point in time given on the command line: an ISO 8601 time
 * ("2026-05-01T12:00:00Z", a date alone is midnight UTC) or milliseconds
 * since the Unix epoch. Names the flag when it is neither.
 */
export function timeArg(flag: string) {
  return (value: string): number => {
    const v = value.trim();
    if (/^\d+$/.test(v)) return Number(v);
    const ms = /^\d{4}-\d{2}-\d{2}/.test(v) ? Date.parse(v) : Number.NaN;
    if (!Number.isFinite(ms)) {
      throw new CliError(
        `${flag} must be an ISO time (e.g. 2026-05-01T12:00:00Z) or milliseconds since the epoch, got ${JSON.stringify(value)}`,
      );
    }
    return ms;
  };
}

/** A stream time for people: ISO 8601 in UTC, or "-" for none. */
export function isoTime(ms: number): string {
  return ms > 0 ? new Date(ms).toISOString() : "-";
}
