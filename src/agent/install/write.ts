/** Writes a host install layout (./layout.ts) under a root directory. */
import { chmod, mkdir, rename, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { LayoutEntry } from "./layout.js";

export interface WrittenEntry {
  /** The path on the host (as the unit names it), not under the root. */
  path: string;
  outcome: "written" | "kept" | "created" | "exists";
}

/** A file or directory of the layout could not be written: which, where, and the system's code. */
export class HostInstallError extends Error {
  override readonly name = "HostInstallError";
}

/** Lays the entries out under root (in order: parents first). Modes are set exactly, whatever the umask. */
export async function writeHostInstall(root: string, entries: LayoutEntry[]): Promise<WrittenEntry[]> {
  const done: WrittenEntry[] = [];
  for (const e of entries) {
    try {
      done.push(await writeEntry(root, e));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === undefined) throw err;
      throw new HostInstallError(
        `cannot write ${join(root, e.path)} (${e.path} of the install): ${code}${code === "EACCES" || code === "EPERM" ? "; run it as root, or give --root a directory of yours" : ""}`,
      );
    }
  }
  return done;
}

async function writeEntry(root: string, e: LayoutEntry): Promise<WrittenEntry> {
  const target = join(root, e.path);
  switch (e.kind) {
    case "dir": {
      const existed = await exists(target);
      await mkdir(target, { recursive: true });
      await chmod(target, e.mode);
      return { path: e.path, outcome: existed ? "exists" : "created" };
    }
    case "file": {
      if (e.keep && (await exists(target))) return { path: e.path, outcome: "kept" };
      await mkdir(join(target, ".."), { recursive: true });
      // Whole or not at all: a reinstall never leaves half a unit.
      const tmp = `${target}.tmp-${process.pid}`;
      await writeFile(tmp, e.content, { mode: e.mode });
      await chmod(tmp, e.mode);
      await rename(tmp, target);
      return { path: e.path, outcome: "written" };
    }
    default: {
      const never: never = e;
      throw new Error(`unknown layout entry ${JSON.stringify(never)}`);
    }
  }
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
