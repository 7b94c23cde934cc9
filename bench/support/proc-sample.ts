/** CPU time and memory of a benchmark's child processes, from /proc (Linux). */
import { readFileSync } from "node:fs";

export interface ProcSample {
  /** User + system CPU time, seconds. */
  cpuS: number;
  rssBytes: number;
  atMs: number;
}

const CLOCK_TICKS = 100;

/** CPU time and resident memory of a process, from /proc (Linux). */
export function sampleProc(pid: number): ProcSample {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name (which may hold spaces) in parentheses.
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const utime = Number(rest[11]);
  const stime = Number(rest[12]);
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return { cpuS: (utime + stime) / CLOCK_TICKS, rssBytes: rssKb * 1024, atMs: performance.now() };
}

/** CPU use between two samples, in cores (1 = one core busy). */
export function cpuCores(a: ProcSample, b: ProcSample): number {
  return (b.cpuS - a.cpuS) / ((b.atMs - a.atMs) / 1000);
}
