/**
 * A process's identity across agent restarts: its PID and its start time
 * (field 22 of /proc/<pid>/stat, clock ticks since boot). A PID is reused
 * by the kernel; the pair is not, so an engine is adopted only when both match.
 */
import { readFile } from "node:fs/promises";

/** The start time of a live process, or undefined when there is none with that PID. */
export async function processStartTime(pid: number): Promise<string | undefined> {
  let stat: string;
  try {
    stat = await readFile(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  return startTimeOfStat(stat);
}

/** Field 22 of a /proc/<pid>/stat line. The command (field 2) may hold spaces and ')': fields after the last ')' are counted. */
export function startTimeOfStat(stat: string): string | undefined {
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // rest[0] is field 3 (state), so field 22 is rest[19]; a zombie has exited.
  if (rest[0] === "Z") return undefined;
  return rest[19];
}
