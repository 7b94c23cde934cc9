import type { Violation } from "./types.js";

/** One line per violation: where, which rule, what broke. */
export function formatViolation(v: Violation): string {
  return `seq ${v.seq} [${v.rule}] ${v.message}`;
}
