/**
 * A backup in one file: its objects one after the other, each as
 *   nameLength (u16 BE) name sizeBytes (u64 BE) bytes
 * after the header "LLMGWBAK" version(1). Written in order and read back
 * through an index of offsets built by one pass over the headers. The
 * manifest is the last object written, so a file cut short has none and is
 * refused as incomplete.
 */
import { type FileHandle, open } from "node:fs/promises";
import type { ArchiveObject, ArchiveStore } from "../log/index.js";

const MAGIC = Buffer.from("LLMGWBAK");
const VERSION = 1;

export class BundleFileWriter implements ArchiveStore {
  readonly where: string;
  #file: FileHandle | undefined;
  readonly #listed: ArchiveObject[] = [];

  constructor(private readonly path: string) {
    this.where = `file ${path}`;
  }

  async #handle(): Promise<FileHandle> {
    if (!this.#file) {
      this.#file = await open(this.path, "wx");
      await this.#file.write(Buffer.concat([MAGIC, Buffer.from([VERSION])]));
    }
    return this.#file;
  }

  async list(dir: string): Promise<ArchiveObject[]> {
    return this.#listed.filter((o) => o.name.startsWith(`${dir}/`));
  }

  get(): Promise<Uint8Array | undefined> {
    return Promise.reject(new Error("a backup file being written is not read back"));
  }

  async put(name: string, data: Uint8Array): Promise<void> {
    const f = await this.#handle();
    const n = Buffer.from(name, "utf8");
    const head = Buffer.alloc(2 + n.length + 8);
    head.writeUInt16BE(n.length, 0);
    n.copy(head, 2);
    head.writeBigUInt64BE(BigInt(data.length), 2 + n.length);
    await f.write(head);
    await f.write(data);
    this.#listed.push({ name, bytes: data.length });
  }

  async close(): Promise<void> {
    if (!this.#file) return;
    await this.#file.sync();
    await this.#file.close();
    this.#file = undefined;
  }
}

export class BundleFileReader implements ArchiveStore {
  readonly where: string;
  #file: FileHandle | undefined;
  #index: Map<string, { offset: number; bytes: number }> | undefined;

  constructor(private readonly path: string) {
    this.where = `file ${path}`;
  }

  async #open(): Promise<{ file: FileHandle; index: Map<string, { offset: number; bytes: number }> }> {
    if (this.#file && this.#index) return { file: this.#file, index: this.#index };
    const file = await open(this.path, "r");
    const size = (await file.stat()).size;
    const head = Buffer.alloc(MAGIC.length + 1);
    await file.read(head, 0, head.length, 0);
    if (!head.subarray(0, MAGIC.length).equals(MAGIC) || head[MAGIC.length] !== VERSION) {
      await file.close();
      throw new Error(`${this.path} is not an llmgw backup file`);
    }
    const index = new Map<string, { offset: number; bytes: number }>();
    let at = head.length;
    const len = Buffer.alloc(2);
    while (at < size) {
      await file.read(len, 0, 2, at);
      const nameLength = len.readUInt16BE(0);
      const rest = Buffer.alloc(nameLength + 8);
      const { bytesRead } = await file.read(rest, 0, rest.length, at + 2);
      if (bytesRead < rest.length) break;
      const name = rest.subarray(0, nameLength).toString("utf8");
      const bytes = Number(rest.readBigUInt64BE(nameLength));
      const offset = at + 2 + nameLength + 8;
      if (offset + bytes > size) break;
      index.set(name, { offset, bytes });
      at = offset + bytes;
    }
    this.#file = file;
    this.#index = index;
    return { file, index };
  }

  async list(dir: string): Promise<ArchiveObject[]> {
    const { index } = await this.#open();
    return [...index]
      .filter(([name]) => name.startsWith(`${dir}/`))
      .map(([name, o]) => ({ name, bytes: o.bytes }));
  }

  async get(name: string): Promise<Uint8Array | undefined> {
    const { file, index } = await this.#open();
    const o = index.get(name);
    if (!o) return undefined;
    const out = new Uint8Array(o.bytes);
    await file.read(out, 0, o.bytes, o.offset);
    return out;
  }

  put(): Promise<void> {
    return Promise.reject(new Error("a backup file is read only"));
  }

  async close(): Promise<void> {
    await this.#file?.close();
    this.#file = undefined;
    this.#index = undefined;
  }
}
