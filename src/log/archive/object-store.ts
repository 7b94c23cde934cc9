/**
 * The archive in a JetStream Object Store of the same NATS (the default):
 * bucket `<stream>-archive` unless named. Objects are written with the
 * Object Store client (its metadata message goes last, so an object is
 * listed only once whole) and read back with what every reader may use:
 * a direct message get for an object's metadata and ordered pull consumers
 * for its chunks and for the listing (the client's own reads use push
 * consumers, which read-only credentials do not get).
 */
import {
  DeliverPolicy,
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
} from "@nats-io/jetstream";
import { Base64UrlPaddedCodec, type ObjectStore, Objm } from "@nats-io/obj";
import type { NatsConnection } from "@nats-io/transport-node";
import { LogError } from "../errors.js";
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
      if (LogError.from(err).code === "not-found") return false;
      throw LogError.from(err, `looking up the archive bucket ${this.bucket}`);
    }
  }

  async list(dir: string): Promise<ArchiveObject[]> {
    const subject = `$O.${this.bucket}.M.>`;
    let objects: number;
    try {
      // One subject per object: the count a listing must reach.
      const info = await (await this.#manager()).streams.info(this.#stream, { subjects_filter: subject });
      objects = Object.keys(info.state.subjects ?? {}).length;
    } catch (err) {
      const e = LogError.from(err, `listing the archive bucket ${this.bucket}`);
      if (e.code === "not-found") return [];
      throw e;
    }
    if (objects === 0) return [];
    const metas = await this.#readAll(subject, DeliverPolicy.LastPerSubject, objects);
    const out: ArchiveObject[] = [];
    for (const m of metas) {
      const meta = JSON.parse(new TextDecoder().decode(m)) as ObjectMeta;
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
      const e = LogError.from(err, `reading ${name} from the archive bucket ${this.bucket}`);
      if (e.code === "not-found") return undefined;
      throw e;
    }
    if (meta.deleted) return undefined;
    const chunks = await this.#readAll(`$O.${this.bucket}.C.${meta.nuid}`, DeliverPolicy.All, meta.chunks);
    const out = new Uint8Array(meta.size);
    let at = 0;
    for (const c of chunks) {
      out.set(c, at);
      at += c.length;
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
      throw LogError.from(err, `writing ${name} to the archive bucket ${this.bucket}`);
    }
  }

  async close(): Promise<void> {}

  /** The first `pending` messages on `subject`, through an ordered pull consumer. */
  async #readAll(subject: string, deliver: DeliverPolicy, pending: number): Promise<Uint8Array[]> {
    const consumer = await this.#js.consumers.get(this.#stream, {
      filter_subjects: [subject],
      deliver_policy: deliver,
    });
    const out: Uint8Array[] = [];
    while (out.length < pending) {
      const batch = await consumer.fetch({
        max_messages: Math.min(1000, pending - out.length),
        expires: 5000,
      });
      let got = 0;
      for await (const m of batch) {
        out.push(m.data);
        got++;
      }
      if (got === 0)
        throw new LogError(
          "unavailable",
          `reading ${subject} from the archive bucket ${this.bucket}: nothing came`,
        );
    }
    return out;
  }
}
