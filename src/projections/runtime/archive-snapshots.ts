/**
 * Projection snapshots kept in the log's archive, one at each segment
 * boundary (written by the archiver). As a `SnapshotStore` they serve
 * replay, the runtime and the API's history when their start lies in the
 * archive. Each is the gzipped JSON of its meta and the canonical state; one
 * of another projection or schema version is skipped, never misread.
 */
import { promisify } from "node:util";
import { gunzip, gzip } from "node:zlib";
import type { Archive, ArchivedSnapshot, Log } from "../../log/index.js";
import type { LoadOptions, ProjectionId, Snapshot, SnapshotMeta, SnapshotStore } from "./snapshot-store.js";

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);

/** The bytes of an archive snapshot of `projection`'s canonical state at `at`. */
export async function encodeArchiveSnapshot(
  projection: ProjectionId,
  at: { seq: number; timeMs: number },
  canonicalState: string,
  createdAtMs: number,
): Promise<Uint8Array> {
  const head = JSON.stringify({
    projection: projection.name,
    schemaVersion: projection.schemaVersion,
    seq: at.seq,
    timeMs: at.timeMs,
    createdAtMs,
    bytes: Buffer.byteLength(canonicalState),
  });
  return new Uint8Array(await gzipAsync(`${head.slice(0, -1)},"state":${canonicalState}}`));
}

interface Stored extends SnapshotMeta {
  state: unknown;
}

export class ArchiveSnapshotStore<S> implements SnapshotStore<S> {
  constructor(private readonly archive: Archive) {}

  async loadNewest(projection: ProjectionId, opts: LoadOptions = {}): Promise<Snapshot<S> | undefined> {
    const all = await this.archive.snapshots();
    for (let i = all.length - 1; i >= 0; i--) {
      const s = all[i] as ArchivedSnapshot;
      if (opts.maxSeq !== undefined && s.seq > opts.maxSeq) continue;
      if (opts.maxTimeMs !== undefined && s.timeMs > opts.maxTimeMs) continue;
      const stored = await this.#read(s);
      if (
        !stored ||
        stored.projection !== projection.name ||
        stored.schemaVersion !== projection.schemaVersion
      )
        continue;
      const { state, ...meta } = stored;
      return { meta, state: state as S };
    }
    return undefined;
  }

  save(): Promise<SnapshotMeta> {
    return Promise.reject(new Error("archive snapshots are written by the archiver only"));
  }

  async list(projectionName: string): Promise<SnapshotMeta[]> {
    const out: SnapshotMeta[] = [];
    for (const s of await this.archive.snapshots()) {
      const stored = await this.#read(s);
      if (stored?.projection === projectionName) {
        const { state: _state, ...meta } = stored;
        out.push(meta);
      }
    }
    return out;
  }

  async #read(s: ArchivedSnapshot): Promise<Stored | undefined> {
    const bytes = await this.archive.readSnapshot(s);
    if (!bytes) return undefined;
    try {
      return JSON.parse((await gunzipAsync(bytes)).toString("utf8")) as Stored;
    } catch {
      // A damaged snapshot saves no time; the segments still have everything.
      return undefined;
    }
  }
}

/**
 * The nearest snapshot at or before the bounds among `store` (the KV
 * snapshots) and the archive's: the one covering more of the log wins.
 */
export async function loadNearestSnapshot<S>(
  log: Log,
  projection: ProjectionId & { revive(json: unknown): S },
  store: SnapshotStore<S> | undefined,
  opts: LoadOptions,
): Promise<Snapshot<S> | undefined> {
  const nearest = await nearestStored(log, projection, store, opts);
  // Stored as JSON: the projection makes its state of it again.
  return nearest && { meta: nearest.meta, state: projection.revive(nearest.state) };
}

async function nearestStored<S>(
  log: Log,
  projection: ProjectionId,
  store: SnapshotStore<S> | undefined,
  opts: LoadOptions,
): Promise<Snapshot<S> | undefined> {
  const fromStore = store ? await store.loadNewest(projection, opts) : undefined;
  if (!log.archive) return fromStore;
  const first = (await log.bounds()).firstSeq;
  // While the stream holds the start, the archive's snapshots are no nearer than folding from it.
  if (first <= 1) return fromStore;
  const fromArchive = await new ArchiveSnapshotStore<S>(log.archive).loadNewest(projection, opts);
  if (!fromArchive) return fromStore;
  return !fromStore || fromArchive.meta.seq > fromStore.meta.seq ? fromArchive : fromStore;
}
