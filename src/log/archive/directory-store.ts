/**
 * An archive in a directory (a mounted volume, or a folder a backup tool
 * copies): one file per object, written under a temporary name and renamed
 * into place, so a file with an archive name is always whole.
 */
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import type { ArchiveObject, ArchiveStore } from "./store.js";

export class DirectoryArchiveStore implements ArchiveStore {
  readonly where: string;
  readonly #root: string;

  constructor(root: string) {
    this.#root = resolve(root);
    this.where = `directory ${this.#root}`;
  }

  async list(dir: string): Promise<ArchiveObject[]> {
    let names: string[];
    try {
      names = await readdir(join(this.#root, dir));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
      throw err;
    }
    const out: ArchiveObject[] = [];
    for (const n of names) {
      if (n.includes(".tmp-")) continue;
      const s = await stat(join(this.#root, dir, n));
      if (s.isFile()) out.push({ name: `${dir}/${n}`, bytes: s.size });
    }
    return out;
  }

  async get(name: string): Promise<Uint8Array | undefined> {
    try {
      return new Uint8Array(await readFile(join(this.#root, name)));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw err;
    }
  }

  async put(name: string, data: Uint8Array): Promise<void> {
    const path = join(this.#root, name);
    await mkdir(dirname(path), { recursive: true });
    const tmp = `${path}.tmp-${process.pid}`;
    try {
      await writeFile(tmp, data, { flush: true });
      await rename(tmp, path);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
  }

  async close(): Promise<void> {}
}
