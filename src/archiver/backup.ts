/**
 * Backup and restore of a log's whole history: the archive's segments, the
 * stream's messages after them and the KV buckets that hold what the log
 * does not (revoked agent identities), consistent at one sequence: the
 * stream's last when the backup began. A backup is laid out like an
 * archive (segments/, snapshots/) with a manifest, `backup.json`, written
 * last. A restore puts every segment into the target's archive and creates
 * the stream to start right after them, so every reader reads the restored
 * history through the archive with its original sequences and times:
 * replay gives the same bytes at every sequence.
 */
import { DeliverPolicy } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import {
  type ArchivedSegment,
  type ArchiveStore,
  decodeSegment,
  encodeSegment,
  ensureStream,
  type Log,
  LogError,
  logErrorFrom,
  type RawRecord,
  readRawRange,
  segmentName,
} from "../log/index.js";
import { DEFAULT_SEGMENT_BYTES } from "./retention.js";

export const MANIFEST = "backup.json";

export interface BackupManifest {
  format: 1;
  stream: string;
  prefix: string;
  /** The backup holds the log up to and including this sequence. */
  seq: number;
  /** Its first sequence (1 unless the log lost its start before it had an archive). */
  firstSeq: number;
  events: number;
  segments: number;
  snapshots: number;
  /** KV buckets: each key's latest value (base64). */
  buckets: Record<string, Record<string, string>>;
  createdAtMs: number;
}

/** Writes the history of `log` up to its last sequence now into `out`. */
export async function backupLog(
  log: Log,
  out: ArchiveStore,
  opts: { buckets: string[]; onProgress?: (seq: number, target: number) => void },
): Promise<BackupManifest> {
  const archive = log.archive;
  const target = (await log.bounds()).lastSeq;
  let next = 0;
  let first = 0;
  let events = 0;
  let segments = 0;
  const write = async (records: RawRecord[]) => {
    if (records.length === 0) return;
    const a = records[0] as RawRecord;
    const z = records.at(-1) as RawRecord;
    await out.put(
      segmentName({ firstSeq: a.seq, lastSeq: z.seq, firstTimeMs: a.timeMs, lastTimeMs: z.timeMs }),
      encodeSegment(records),
    );
    if (first === 0) first = a.seq;
    next = z.seq + 1;
    events += records.length;
    segments++;
    opts.onProgress?.(z.seq, target);
  };

  const extent = await archive?.extent({ fresh: true });
  next = extent?.firstSeq ?? (await log.bounds()).firstSeq;
  while (next <= target) {
    // What the archive holds is copied from it, segment by segment.
    const listed = archive ? await archive.segments({ fresh: true }) : [];
    const covering = listed.filter((s) => s.lastSeq >= next && s.firstSeq <= target);
    if (covering.length > 0 && (covering[0] as ArchivedSegment).firstSeq <= next) {
      for (const s of covering) {
        const bytes = await archive?.store.get(s.name);
        if (!bytes) throw new LogError("not-found", `archive segment ${s.name} could not be read`);
        const records = decodeSegment(bytes, s.name).filter((r) => r.seq >= next && r.seq <= target);
        await write(records);
      }
      continue;
    }
    // The rest from the stream; purged meanwhile (archived just now), it is taken from the archive.
    try {
      let chunk: RawRecord[] = [];
      let bytes = 0;
      for await (const batch of readRawRange(log, next, target)) {
        for (const r of batch) {
          chunk.push(r);
          bytes += r.data.length;
          if (bytes >= DEFAULT_SEGMENT_BYTES) {
            await write(chunk);
            chunk = [];
            bytes = 0;
          }
        }
      }
      await write(chunk);
    } catch (err) {
      if (!(err instanceof LogError && err.code === "not-found") || !archive) throw err;
    }
  }
  if (next <= target) throw new LogError("internal", `the backup stopped at ${next} of ${target}`);

  let snapshots = 0;
  for (const s of (await archive?.snapshots()) ?? []) {
    if (s.seq > target) continue;
    const bytes = await archive?.readSnapshot(s);
    if (!bytes) continue;
    await out.put(s.name, bytes);
    snapshots++;
  }
  const buckets: BackupManifest["buckets"] = {};
  for (const b of opts.buckets) buckets[b] = await readBucket(log, b);
  const manifest: BackupManifest = {
    format: 1,
    stream: log.stream,
    prefix: log.subjects.prefix,
    seq: target,
    firstSeq: first || target + 1,
    events,
    segments,
    snapshots,
    buckets,
    createdAtMs: Date.now(),
  };
  await out.put(MANIFEST, new TextEncoder().encode(`${JSON.stringify(manifest, null, 2)}\n`));
  return manifest;
}

/** Each key's latest value in a KV bucket (deleted keys left out; a missing bucket is empty). */
async function readBucket(log: Log, bucket: string): Promise<Record<string, string>> {
  const stream = `KV_${bucket}`;
  const prefix = `$KV.${bucket}.`;
  let count: number;
  try {
    const info = await log.jsm.streams.info(stream, { subjects_filter: `${prefix}>` });
    count = Object.keys(info.state.subjects ?? {}).length;
  } catch (err) {
    if (logErrorFrom(err).code === "not-found") return {};
    throw logErrorFrom(err, `reading the bucket ${bucket}`);
  }
  const out: Record<string, string> = {};
  if (count === 0) return out;
  const consumer = await log.js.consumers.get(stream, {
    filter_subjects: [`${prefix}>`],
    deliver_policy: DeliverPolicy.LastPerSubject,
  });
  let seen = 0;
  while (seen < count) {
    const batch = await consumer.fetch({ max_messages: count - seen, expires: 5_000 });
    let got = 0;
    for await (const m of batch) {
      got++;
      const op = m.headers?.get("KV-Operation");
      if (op === "DEL" || op === "PURGE") continue;
      out[m.subject.slice(prefix.length)] = Buffer.from(m.data).toString("base64");
    }
    if (got === 0) throw new LogError("unavailable", `reading the bucket ${bucket}: nothing came within 5 s`);
    seen += got;
  }
  return out;
}

export async function readManifest(from: ArchiveStore): Promise<BackupManifest> {
  const bytes = await from.get(MANIFEST);
  if (!bytes) {
    throw new LogError(
      "not-found",
      `${from.where} holds no ${MANIFEST}: not a backup, or one that did not finish`,
    );
  }
  const m = JSON.parse(new TextDecoder().decode(bytes)) as BackupManifest;
  if (m.format !== 1)
    throw new LogError("malformed", `${from.where}: backup format ${m.format} is not known here`);
  return m;
}

/** What the target NATS holds of a log already: a non-empty stream or archive is not overwritten unasked. */
export async function targetHolds(log: Log): Promise<{ streamLastSeq: number; archiveObjects: number }> {
  let streamLastSeq = 0;
  try {
    streamLastSeq = (await log.bounds()).lastSeq;
  } catch (err) {
    if (logErrorFrom(err).code !== "not-found") throw err;
  }
  const archiveObjects = log.archive
    ? (await log.archive.store.list("segments")).length + (await log.archive.store.list("snapshots")).length
    : 0;
  return { streamLastSeq, archiveObjects };
}

/**
 * Rebuilds the backup into `log`'s NATS: the archive (segments and
 * snapshots, put in sequence order), the stream created empty to start at
 * the backup's sequence + 1, and the buckets. `force` first removes the
 * stream and the archive bucket there (and the buckets restored).
 */
export async function restoreLog(
  log: Log,
  from: ArchiveStore,
  manifest: BackupManifest,
  opts: {
    replicas: number;
    force: boolean;
    archiveBucketStream?: string;
    onProgress?: (seq: number) => void;
  },
): Promise<void> {
  const archive = log.archive;
  if (!archive) throw new LogError("invalid-argument", "the target log has no archive to restore into");
  if (opts.force) {
    await deleteStream(log, log.stream);
    if (opts.archiveBucketStream) await deleteStream(log, opts.archiveBucketStream);
    for (const b of Object.keys(manifest.buckets)) await deleteStream(log, `KV_${b}`);
  }
  // An empty stream there (a process started before the restore) is made again to start after the backup.
  const existing = await log.bounds().catch(() => undefined);
  if (existing && existing.lastSeq === 0 && existing.firstSeq !== manifest.seq + 1)
    await deleteStream(log, log.stream);
  await ensureStream(log.jsm, {
    name: log.stream,
    prefix: manifest.prefix,
    replicas: opts.replicas,
    firstSeq: manifest.seq + 1,
  });
  const segments = (await from.list("segments")).map((o) => o.name).sort();
  for (const name of segments) {
    const bytes = await from.get(name);
    if (!bytes) throw new LogError("not-found", `${from.where}: ${name} could not be read`);
    await archive.store.put(name, bytes);
    const last = name.split("/")[1]?.split("-")[1];
    if (last) opts.onProgress?.(Number(last));
  }
  for (const o of await from.list("snapshots")) {
    const bytes = await from.get(o.name);
    if (bytes) await archive.store.put(o.name, bytes);
  }
  const kvm = new Kvm(log.js);
  for (const [bucket, entries] of Object.entries(manifest.buckets)) {
    const keys = Object.entries(entries);
    if (keys.length === 0) continue;
    const kv = await kvm.create(bucket, { replicas: opts.replicas });
    for (const [key, value] of keys) await kv.put(key, Buffer.from(value, "base64"));
  }
  const extent = await archive.extent({ fresh: true });
  if (manifest.events > 0 && (extent?.lastSeq !== manifest.seq || extent.firstSeq !== manifest.firstSeq)) {
    throw new LogError(
      "internal",
      `the restored archive holds ${extent?.firstSeq ?? 0}…${extent?.lastSeq ?? 0}, the backup ${manifest.firstSeq}…${manifest.seq}`,
    );
  }
}

async function deleteStream(log: Log, name: string): Promise<void> {
  try {
    await log.jsm.streams.delete(name);
  } catch (err) {
    if (logErrorFrom(err).code !== "not-found") throw logErrorFrom(err, `removing stream ${name}`);
  }
}
