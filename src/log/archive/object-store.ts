/**
 * The archive in a JetStream Object Store of the same NATS (the default):
 * bucket `<stream>-archive` unless named. Objects are written with the
 * Object Store client (its metadata message goes last, so an object is
 * listed only once whole) and read back with what every reader may use:
 * a direct message get for an object's metadata and batched direct gets for
 * its chunks and for the listing, which hold no consumer (the client's own
 * reads use push consumers; the reader and router roles may create none).
 */
import {
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
  type StoredMsg,
} from "@nats-io/jetstream";
import { Base64UrlPaddedCodec, type ObjectStore, Objm } from "@nats-io/obj";
import type { NatsConnection } from "@nats-io/transport-node";
import { LogError, logErrorFrom } from "../errors.js";
import type { ArchiveObject, ArchiveStore } from "./store.js";

/** The default bucket of a log stream's archive. */
export function defaultArchiveBucket(stream: string): string {
  return `${stream}-archive`;
}

interface ObjectMeta {
  name: string;
  nuid: string;
  size: number;
  chunks: number;
  deleted?: boolean;
}

export class NatsObjectArchiveStore implements ArchiveStore {
  readonly where: string;
  readonly #stream: string;
  readonly #js: JetStreamClient;
  #jsm: JetStreamManager | undefined;
  #writer: ObjectStore | undefined;

  constructor(
    private readonly nc: NatsConnection,
    readonly bucket: string,
    private readonly replicas = 1,
  ) {
    this.where = `nats object store ${bucket}`;
    this.#stream = `OBJ_${bucket}`;
    this.#js = jetstream(nc);
  }

  async #manager(): Promise<JetStreamManager> {
    this.#jsm ??= await jetstreamManager(this.nc);
    return this.#jsm;
  }

  /** Whether the bucket exists (readers treat a missing one as an empty archive). */
  async exists(): Promise<boolean> {
    try {
      await (await this.#manager()).streams.info(this.#stream);
      return true;
    } catch (err) {
      if (logErrorFrom(err).code === "not-found") return false;
      throw logErrorFrom(err, `looking up the archive bucket ${this.bucket}`);
    }
  }

  async list(dir: string): Promise<ArchiveObject[]> {
    const subject = `$O.${this.bucket}.M.>`;
    let messages: number;
    try {
      // One subject per object, each with its metadata messages: the count a listing must reach.
      const info = await (await this.#manager()).streams.info(this.#stream, { subjects_filter: subject });
      messages = Object.values(info.state.subjects ?? {}).reduce((n, c) => n + c, 0);
    } catch (err) {
      const e = logErrorFrom(err, `listing the archive bucket ${this.bucket}`);
      if (e.code === "not-found") return [];
      throw e;
    }
    if (messages === 0) return [];
    // The newest metadata of each object, in the order of those newest messages.
    const newest = new Map<string, StoredMsg>();
    for (const m of await this.#readAll(subject, messages)) {
      newest.delete(m.subject);
      newest.set(m.subject, m);
    }
    const out: ArchiveObject[] = [];
    for (const m of newest.values()) {
      const meta = m.json<ObjectMeta>();
      if (meta.deleted || !meta.name.startsWith(`${dir}/`)) continue;
      out.push({ name: meta.name, bytes: meta.size });
    }
    return out;
  }

  async get(name: string): Promise<Uint8Array | undefined> {
    const jsm = await this.#manager();
    let meta: ObjectMeta;
    try {
      const m = await jsm.streams.getMessage(this.#stream, {
        last_by_subj: `$O.${this.bucket}.M.${Base64UrlPaddedCodec.encode(name)}`,
      });
      if (!m) return undefined;
      meta = m.json<ObjectMeta>();
    } catch (err) {
      const e = logErrorFrom(err, `reading ${name} from the archive bucket ${this.bucket}`);
      if (e.code === "not-found") return undefined;
      throw e;
    }
    if (meta.deleted) return undefined;
    const chunks = await this.#readAll(`$O.${this.bucket}.C.${meta.nuid}`, meta.chunks);
    const out = new Uint8Array(meta.size);
    let at = 0;
    for (const c of chunks) {
      if (at + c.data.length > meta.size) {
        throw new LogError("malformed", `archive object ${name} has more than its ${meta.size} bytes`);
      }
      out.set(c.data, at);
      at += c.data.length;
    }
    if (at !== meta.size) {
      throw new LogError("malformed", `archive object ${name} has ${at} of its ${meta.size} bytes`);
    }
    return out;
  }

  async put(name: string, data: Uint8Array): Promise<void> {
    try {
      this.#writer ??= await new Objm(this.#js).create(this.bucket, {
        storage: "file" as never,
        replicas: this.replicas,
      });
      await this.#writer.putBlob({ name }, data);
    } catch (err) {
      throw logErrorFrom(err, `writing ${name} to the archive bucket ${this.bucket}`);
    }
  }

  async close(): Promise<void> {}

  /**
   * The first `count` messages on `subject` (wildcards allowed), in
   * stream order, read with batched direct gets: they hold no consumer,
   * which the reader and router roles may not create (docs/SECURITY.md).
   */
  async #readAll(subject: string, count: number): Promise<StoredMsg[]> {
    const jsm = await this.#manager();
    const out: StoredMsg[] = [];
    let seq = 1;
    try {
      while (out.length < count) {
        const it = await jsm.direct.getBatch(this.#stream, {
          seq,
          next_by_subj: subject,
          batch: Math.min(1000, count - out.length),
        });
        let got = 0;
        for await (const m of it) {
          out.push(m);
          seq = m.seq + 1;
          got++;
        }
        if (got === 0)
          throw new LogError(
            "unavailable",
            `reading ${subject} from the archive bucket ${this.bucket}: ${out.length} of ${count} messages came`,
          );
      }
    } catch (err) {
      throw logErrorFrom(err, `reading ${subject} from the archive bucket ${this.bucket}`);
    }
    return out;
  }
}
