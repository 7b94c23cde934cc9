import { readFileSync } from "node:fs";

/** File descriptors kept for everything but client connections (NATS, logs, files, the metrics listener). */
const RESERVED_FDS = 64;

/** The process's soft limit of open files, where the system says (Linux); undefined elsewhere. */
export function openFileLimit(): number | undefined {
  try {
    const limits = readFileSync("/proc/self/limits", "utf8");
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(limits);
    return m?.[1] && m[1] !== "unlimited" ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The default total connection cap: `fallback`, lowered to stay below the
 * file-descriptor limit, so a flood of connections is refused by the cap
 * (and counted) before accept fails for want of descriptors.
 */
export function defaultMaxConnections(fallback: number): number {
  const fds = openFileLimit();
  return fds === undefined ? fallback : Math.max(16, Math.min(fallback, fds - RESERVED_FDS));
}
