/**
 * The exit status of an engine that outlived its agent. Engines run detached
 * so that an agent restart leaves them alone, but then the restarted agent is
 * not their parent and cannot wait for them: a small `sh` wrapper, the
 * process group's leader, runs the engine in the foreground and writes its
 * status to a file beside the shard's record when it ends.
 */
import { constants } from "node:fs";
import { access, readFile, stat } from "node:fs/promises";
import { delimiter, join } from "node:path";

/**
 * `sh -c` script: $1 = the status file, the rest = the engine's argv.
 * TERM, INT and HUP are caught (not ignored: an ignored signal would be
 * inherited by the engine), so a stop sent to the group reaches the engine
 * while the wrapper lives on to record how it ended; POSIX shells run the
 * trap only once the foreground command has finished. SIGKILL takes both,
 * and then there is no status to read.
 */
export const EXIT_RECORDER = [
  "trap : TERM INT HUP",
  "f=$1; shift",
  '"$@"',
  "c=$?",
  '(umask 077; echo "$c" > "$f.tmp") && mv "$f.tmp" "$f"',
  'exit "$c"',
].join("\n");

/** The status the wrapper recorded, or undefined when there is none (killed, or never ended). */
export async function readRecordedExit(path: string): Promise<number | undefined> {
  try {
    const text = (await readFile(path, "utf8")).trim();
    return /^\d+$/.test(text) ? Number(text) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether `program` names an executable file, as exec would find it: a path
 * as given, a bare name on PATH. Checked before starting, so a missing
 * engine is a refused start, not a start that fails later with status 127.
 */
export async function executableOnPath(program: string, path: string | undefined): Promise<boolean> {
  const candidates = program.includes("/")
    ? [program]
    : (path ?? "")
        .split(delimiter)
        .filter((d) => d !== "")
        .map((d) => join(d, program));
  for (const c of candidates) {
    try {
      await access(c, constants.X_OK);
      if ((await stat(c)).isFile()) return true;
    } catch {
      // Not here.
    }
  }
  return false;
}
