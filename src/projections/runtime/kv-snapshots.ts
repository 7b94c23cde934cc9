/**
 * Snapshots in a JetStream KV bucket. A state can be larger than one NATS
 * message (1 MiB by default), so it is gzipped and split into chunks; a
 * manifest, written last, names the chunks and the digest of the whole. A
 * snapshot without a manifest was never finished and is invisible; one whose
 * chunks are missing or do not match the digest is skipped, not fatal.
 *
 * Keys (one bucket serves every stream and projection):
 *   <stream>.<projection>.m.<seq>        manifest (JSON)
 *   <stream>.<projection>.c.<seq>.<n>    chunk n of the gzipped canonical JSON
 * The manifest also records when the stream was created, so snapshots of a
 * deleted stream are not applied to a new one that reuses its name.
 */
import { createHash } from "node:crypto";
import { promisify } from "node:util";
import { gunzip, gzip } from "node:zlib";
import type { JetStreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import type { Logger } from "pino";
import { bucketKeys, type Log, logErrorFrom, openBucket } from "../../log/index.js";
import type { LoadOptions, ProjectionId, Snapshot, SnapshotMeta, SnapshotStore } from "./snapshot-store.js";

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);

export const DEFAULT_SNAPSHOT_BUCKET = "llmgw_snapshots";
const FORMAT = 1;
const SEQ_DIGITS = 15;

export interface KvSnapshotOptions {
  /** Bucket name; default "llmgw_snapshots". */
  bucket?: string;
  /** Create the bucket when missing (default true). With false, a missing bucket means no snapshots. */
  create?: boolean;
  /** Snapshots kept per projection (older ones are removed); default 4. */
  keep?: number;
  /** Largest chunk, bytes; default 512 KiB (under the default 1 MiB message limit). */
  chunkBytes?: number;
  logger?: Logger;
}

interface Manifest extends SnapshotMeta {
  format: number;
  stream: string;
  streamCreated: string;
  encoding: "gzip";
  chunks: number;
  sha256: string;
}

/**
 * Opens the snapshot store of `log`'s stream. Returns undefined when the
 * bucket does not exist and `create` is false (a read-only tool on a log
 * nobody has snapshotted).
 */
export async function openKvSnapshotStore<S>(
  log: Log,
  opts: KvSnapshotOptions = {},
): Promise<KvSnapshotStore<S> | undefined> {
  const bucket = opts.bucket ?? DEFAULT_SNAPSHOT_BUCKET;
  let streamCreated: string;
  try {
    streamCreated = (await log.jsm.streams.info(log.stream)).created;
  } catch (err) {
    throw logErrorFrom(err, `reading stream ${log.stream}`);
  }
  let kv: KV | undefined;
  try {
    // Puts and deletes only: a bucket that refuses rollups and purges (src/log/buckets.ts).
    kv = await openBucket(log.js, bucket, {
      history: 1,
      replicas: log.replicas,
      create: opts.create !== false,
      ...(opts.logger ? { warn: (m: string) => opts.logger?.warn(m) } : {}),
    });
  } catch (err) {
    throw logErrorFrom(err, `opening snapshot bucket ${bucket}`);
  }
  if (!kv) return undefined;
  return new KvSnapshotStore<S>(kv, { jsm: log.jsm, bucket }, log.stream, streamCreated, opts);
}

export class KvSnapshotStore<S> implements SnapshotStore<S> {
  readonly #keep: number;
  readonly #chunkBytes: number;
  readonly #logger: Logger | undefined;

  constructor(
    private readonly kv: KV,
    /** Where keys are listed from, with no consumer (see `bucketKeys`). */
    private readonly where: { jsm: JetStreamManager; bucket: string },
    private readonly stream: string,
    private readonly streamCreated: string,
    opts: KvSnapshotOptions = {},
  ) {
    this.#keep = Math.max(1, opts.keep ?? 4);
    this.#chunkBytes = Math.max(1024, opts.chunkBytes ?? 512 * 1024);
    this.#logger = opts.logger;
  }

  #base(projection: string): string {
    return `${this.stream}.${projection}`;
  }
  #manifestKey(projection: string, seq: number): string {
    return `${this.#base(projection)}.m.${String(seq).padStart(SEQ_DIGITS, "0")}`;
  }
  #chunkKey(projection: string, seq: number, n: number): string {
    return `${this.#base(projection)}.c.${String(seq).padStart(SEQ_DIGITS, "0")}.${n}`;
  }

  /** Sequences that have a manifest, newest first. */
  async #manifestSeqs(projection: string): Promise<number[]> {
    const seqs: number[] = [];
    try {
      for (const k of await bucketKeys(
        this.kv,
        this.where.jsm,
        this.where.bucket,
        `${this.#base(projection)}.m.*`,
      )) {
        const seq = Number(k.slice(k.lastIndexOf(".") + 1));
        if (Number.isSafeInteger(seq)) seqs.push(seq);
      }
    } catch (err) {
      throw logErrorFrom(err, `listing snapshots of ${projection}`);
    }
    return seqs.sort((a, b) => b - a);
  }

  async #manifest(projection: string, seq: number): Promise<Manifest> {
    const e = await this.kv.get(this.#manifestKey(projection, seq));
    if (e?.operation !== "PUT") throw new Error("manifest is gone");
    const m = JSON.parse(new TextDecoder().decode(e.value)) as Manifest;
    if (typeof m !== "object" || m === null || m.format !== FORMAT || typeof m.schemaVersion !== "number") {
      throw new Error(`manifest has an unknown format (${JSON.stringify(m?.format)})`);
    }
    return m;
  }

  async list(projectionName: string): Promise<SnapshotMeta[]> {
    const out: SnapshotMeta[] = [];
    for (const seq of (await this.#manifestSeqs(projectionName)).reverse()) {
      try {
        const m = await this.#manifest(projectionName, seq);
        out.push(metaOf(m));
      } catch {
        // Unreadable manifests are reported by loadNewest; a listing shows what can be read.
      }
    }
    return out;
  }

  async loadNewest(projection: ProjectionId, opts: LoadOptions = {}): Promise<Snapshot<S> | undefined> {
    for (const seq of await this.#manifestSeqs(projection.name)) {
      if (opts.maxSeq !== undefined && seq > opts.maxSeq) continue;
      const where = `snapshot of ${projection.name} at sequence ${seq}`;
      let m: Manifest;
      try {
        m = await this.#manifest(projection.name, seq);
      } catch (err) {
        this.#logger?.warn({ seq, err: String(err) }, `ignoring unreadable ${where}: ${String(err)}`);
        continue;
      }
      if (m.schemaVersion !== projection.schemaVersion || m.projection !== projection.name) {
        this.#logger?.info(
          { seq, schemaVersion: m.schemaVersion, wanted: projection.schemaVersion },
          `ignoring ${where}: schema version ${m.schemaVersion}, this version reads ${projection.schemaVersion}`,
        );
        continue;
      }
      if (m.stream !== this.stream || m.streamCreated !== this.streamCreated) {
        this.#logger?.warn(
          { seq, streamCreated: m.streamCreated },
          `ignoring ${where}: it was taken of an earlier stream named ${this.stream} (created ${m.streamCreated})`,
        );
        continue;
      }
      if (opts.maxTimeMs !== undefined && m.timeMs > opts.maxTimeMs) continue;
      try {
        const state = await this.#readState(m);
        return { meta: metaOf(m), state };
      } catch (err) {
        this.#logger?.warn({ seq, err: String(err) }, `ignoring corrupted ${where}: ${String(err)}`);
      }
    }
    return undefined;
  }

  async #readState(m: Manifest): Promise<S> {
    if (m.encoding !== "gzip" || !Number.isInteger(m.chunks) || m.chunks < 1) {
      throw new Error(`unknown encoding ${JSON.stringify(m.encoding)} or chunk count ${m.chunks}`);
    }
    const parts: Uint8Array[] = [];
    for (let n = 0; n < m.chunks; n++) {
      const e = await this.kv.get(this.#chunkKey(m.projection, m.seq, n));
      if (e?.operation !== "PUT") throw new Error(`chunk ${n} of ${m.chunks} is missing`);
      parts.push(e.value);
    }
    const text = await gunzipAsync(Buffer.concat(parts));
    const digest = createHash("sha256").update(text).digest("hex");
    if (digest !== m.sha256) throw new Error("content does not match its digest");
    return JSON.parse(text.toString("utf8")) as S;
  }

  async save(
    projection: ProjectionId,
    at: { seq: number; timeMs: number },
    canonicalState: string,
  ): Promise<SnapshotMeta> {
    const text = Buffer.from(canonicalState, "utf8");
    const zipped = await gzipAsync(text);
    const chunks: Uint8Array[] = [];
    for (let i = 0; i < zipped.length || chunks.length === 0; i += this.#chunkBytes) {
      chunks.push(zipped.subarray(i, i + this.#chunkBytes));
    }
    const m: Manifest = {
      format: FORMAT,
      projection: projection.name,
      schemaVersion: projection.schemaVersion,
      seq: at.seq,
      timeMs: at.timeMs,
      createdAtMs: Date.now(),
      bytes: text.length,
      stream: this.stream,
      streamCreated: this.streamCreated,
      encoding: "gzip",
      chunks: chunks.length,
      sha256: createHash("sha256").update(text).digest("hex"),
    };
    try {
      // Chunks first, manifest last: a reader never sees a half-written snapshot.
      for (const [n, c] of chunks.entries()) await this.kv.put(this.#chunkKey(m.projection, m.seq, n), c);
      await this.kv.put(this.#manifestKey(m.projection, m.seq), JSON.stringify(m));
    } catch (err) {
      throw logErrorFrom(err, `saving a snapshot of ${projection.name} at sequence ${at.seq}`);
    }
    await this.#prune(projection.name);
    return metaOf(m);
  }

  /** Keeps the newest `keep` snapshots; older ones go, manifest first so none is seen half-removed. */
  async #prune(projection: string): Promise<void> {
    const seqs = await this.#manifestSeqs(projection);
    for (const seq of seqs.slice(this.#keep)) {
      try {
        // Deletes, not purges: the bucket refuses the rollup a purge is (one value per key, so the marker replaces it).
        await this.kv.delete(this.#manifestKey(projection, seq));
        const chunks = `${this.#base(projection)}.c.${String(seq).padStart(SEQ_DIGITS, "0")}.*`;
        for (const k of await bucketKeys(this.kv, this.where.jsm, this.where.bucket, chunks)) {
          await this.kv.delete(k);
        }
      } catch (err) {
        this.#logger?.warn({ seq, err: String(err) }, `could not remove an old snapshot: ${String(err)}`);
      }
    }
  }
}

function metaOf(m: Manifest): SnapshotMeta {
  return {
    projection: m.projection,
    schemaVersion: m.schemaVersion,
    seq: m.seq,
    timeMs: m.timeMs,
    createdAtMs: m.createdAtMs,
    bytes: m.bytes,
  };
}
