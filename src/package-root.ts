/**
 * The folder that holds llmgw's package.json: the repository when the
 * TypeScript sources run (through tsx), the installed package when the
 * compiled code in dist/src runs. Files that ship beside the code (the built
 * web UI in dist/ui, examples/, scripts/) are found from here, because the two
 * layouts put a module at different depths.
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";

export function findPackageRoot(from: string): string {
  let dir = from;
  while (!existsSync(join(dir, "package.json"))) {
    const parent = dirname(dir);
    if (parent === dir) {
      throw new Error(`no package.json in ${from} or any folder above it`);
    }
    dir = parent;
  }
  return dir;
}

export const PACKAGE_ROOT = findPackageRoot(import.meta.dirname);
