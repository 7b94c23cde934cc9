/** Writes a host install layout (./layout.ts) under a root directory. */
import { chmod, mkdir, rename, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { LayoutEntry } from "./layout.js";

export interface WrittenEntry {
  /** The path on the host (as the unit names it), not under the root. */
  path: string;
  outcome: "written" | "kept" | "created" | "exists";
}

/** Lays the entries out under root (in order: parents first). Modes are set exactly, whatever the umask. */
export async function writeHostInstall(root: string, entries: LayoutEntry[]): Promise<WrittenEntry[]> {
  const done: WrittenEntry[] = [];
  for (const e of entries) {
    const target = join(root, e.path);
    switch (e.kind) {
      case "dir": {
        const existed = await exists(target);
        await mkdir(target, { recursive: true });
        await chmod(target, e.mode);
        done.push({ path: e.path, outcome: existed ? "exists" : "created" });
        break;
      }
      case "file": {
        if (e.keep && (await exists(target))) {
          done.push({ path: e.path, outcome: "kept" });
          break;
        }
        await mkdir(join(target, ".."), { recursive: true });
        // Whole or not at all: a reinstall never leaves half a unit.
        const tmp = `${target}.tmp-${process.pid}`;
        await writeFile(tmp, e.content, { mode: e.mode });
        await chmod(tmp, e.mode);
        await rename(tmp, target);
        done.push({ path: e.path, outcome: "written" });
        break;
      }
      default: {
        const never: never = e;
        throw new Error(`unknown layout entry ${JSON.stringify(never)}`);
      }
    }
  }
  return done;
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    (err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") return false;
      throw err;
    },
  );
}
