/**
 * History: the archive, replay across its boundary, backup and restore.
 * A realistic log (bench/replay's fleet churn) is written to a fresh
 * stream, then in the same run:
 *   - archive throughput: `llmgw archiver`'s code sealing the whole stream
 *     into the NATS Object Store (segments of 8 MiB, a fleet snapshot at
 *     each boundary), against the raw limit: a bare Object Store put of the
 *     same segment bytes into another bucket of the same server;
 *   - the same into an S3-compatible store (a real S3 server, s3rver, as a
 *     process of its own on loopback), against a bare S3 PUT of the same
 *     segment bytes into the same server;
 *   - replay across the boundary: the fold of the whole log from its first
 *     event with the first half purged from the stream (read from the
 *     archive), against the same fold while the stream held everything;
 *   - backup (archive + stream to a directory) and restore (into a fresh
 *     nats-server) times for the same log.
 * 1,000,000 events in the full run (20,000 with --quick);
 * LLMGW_BENCH_HISTORY_EVENTS=N another number.
 */
import { PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { Objm } from "@nats-io/obj";
import { Archiver, backupLog, readManifest, restoreLog } from "../../src/archiver/index.js";
import {
  AppendWindow,
  Archive,
  DirectoryArchiveStore,
  encodeSegment,
  type Log,
  openLog,
  type RawRecord,
  readRawRange,
  S3ArchiveStore,
} from "../../src/log/index.js";
import { canonicalJson, fleetProjection } from "../../src/projections/index.js";
import { replay } from "../../src/projections/runtime/index.js";
import { startServer, tempDir, uniqueStream } from "../../test/harness/nats.js";
import { startS3Server } from "../../test/harness/s3.js";
import { fleetChurn } from "../../test/support/fleet-churn.js";
import { figure, type Scenario } from "../support/result.js";

const SEGMENT_BYTES = 8 * 1024 * 1024;
const S3_BUCKET = "bench-archive";

/** `LLMGW_BENCH_HISTORY_EVENTS=N`: another size of log (at least 1,000 events). */
function eventsFrom(env: string | undefined): number | undefined {
  if (env === undefined || env === "") return undefined;
  const n = Number(env);
  if (!Number.isInteger(n) || n < 1_000)
    throw new Error(`LLMGW_BENCH_HISTORY_EVENTS: expected a whole number of events ≥ 1000, got ${env}`);
  return n;
}

/** The archiver's code sealing the whole of `log` into `archive` (no retention: nothing purged), in ms. */
async function archiveAll(
  log: Log,
  archive: Archive,
  last: number,
  progress: (msg: string) => void,
  what: string,
): Promise<number> {
  const archiver = new Archiver(log, archive, {
    maxAgeMs: 0,
    maxBytes: 0,
    segmentBytes: SEGMENT_BYTES,
    sealAfterMs: 200,
    tickMs: 50,
  });
  const ac = new AbortController();
  const t = performance.now();
  const running = archiver.run(ac.signal);
  let failed: unknown;
  running.catch((err) => {
    failed = err;
  });
  while (archiver.status.archivedSeq < last) {
    if (failed) throw failed;
    progress(`${what}: ${n(archiver.status.archivedSeq)} / ${n(last)} events`);
    await new Promise((r) => setTimeout(r, 20));
  }
  const ms = performance.now() - t;
  ac.abort();
  await running;
  const extent = await archive.extent({ fresh: true });
  if (extent?.lastSeq !== last)
    throw new Error(`the archive ends at ${extent?.lastSeq}, the stream at ${last}`);
  return ms;
}

const n = (v: number) => v.toLocaleString("en");

export const history: Scenario = {
  name: "history",
  describe:
    "archive throughput vs a bare Object Store put and vs a bare S3 put; replay across the archive boundary vs from the stream; backup and restore",
  async run(ctx) {
    const events = eventsFrom(process.env.LLMGW_BENCH_HISTORY_EVENTS) ?? (ctx.quick ? 20_000 : 1_000_000);
    const nodes = 64;
    const server = await startServer();
    const target = await startServer();
    const s3 = await startS3Server({ buckets: [S3_BUCKET] });
    const s3Config = {
      bucket: S3_BUCKET,
      endpoint: s3.endpoint,
      forcePathStyle: true,
      credentials: s3.credentials,
    };
    const stream = uniqueStream("HIST");
    const log = await openLog({ url: server.url, clientName: "bench-history", name: stream });
    try {
      const window = new AppendWindow(log.appender, 256);
      const acks: Promise<unknown>[] = [];
      let written = 0;
      for (const e of fleetChurn({ nodes, events })) {
        acks.push((await window.start(e)).acked);
        written++;
        if (acks.length >= 4096) {
          await Promise.all(acks.splice(0));
          ctx.progress(`writing the log: ${n(written)} / ${n(events)} events`);
        }
      }
      await Promise.all(acks);
      const { lastSeq: last, bytes: streamBytes } = await log.bounds();
      const replayProgress = (what: string) => ({
        progressEvery: 50_000,
        onProgress: (p: { seq: number }) => ctx.progress(`${what}: ${n(p.seq)} / ${n(last)} events`),
      });

      // Replay from the stream alone (nothing archived yet), after one unmeasured warm-up fold.
      ctx.progress("replay from the stream");
      await replay(log, fleetProjection, {
        archiveSnapshots: false,
        ...replayProgress("replay from the stream (warm-up)"),
      });
      let t = performance.now();
      const fromStream = await replay(log, fleetProjection, {
        archiveSnapshots: false,
        ...replayProgress("replay from the stream"),
      });
      const streamReplayMs = performance.now() - t;

      // Archive throughput: the archiver's code, no retention (nothing purged while measured).
      const archive = log.archive;
      if (!archive) throw new Error("the log has no archive");
      const archiveMs = await archiveAll(log, archive, last, ctx.progress, "archiving to the Object Store");
      const extent = await archive.extent({ fresh: true });
      if (!extent) throw new Error("nothing archived");

      // The raw limit: a bare put of the same segment bytes (re-encoded the same way) into another bucket.
      ctx.progress("bare Object Store put");
      const segments = await archive.segments({ fresh: true });
      const blobs: Uint8Array[] = [];
      for (const s of segments) {
        const records: RawRecord[] = [];
        for await (const b of readRawRange(log, s.firstSeq, s.lastSeq)) records.push(...b);
        blobs.push(encodeSegment(records));
      }
      const bare = await new Objm(log.js).create(`bare-${stream}`, { storage: "file" as never });
      t = performance.now();
      for (let i = 0; i < blobs.length; i++) await bare.putBlob({ name: `s${i}` }, blobs[i] as Uint8Array);
      const bareMs = performance.now() - t;
      const archivedBytes = extent.bytes;

      // The same into S3: the archiver's code against a bare PUT of the same bytes to the same server.
      const s3Archive = new Archive(new S3ArchiveStore({ ...s3Config, prefix: "archive" }));
      const s3ArchiveMs = await archiveAll(log, s3Archive, last, ctx.progress, "archiving to S3");
      await s3Archive.close();
      ctx.progress("bare S3 put");
      const client = new S3Client({ region: "us-east-1", ...s3Config });
      t = performance.now();
      for (let i = 0; i < blobs.length; i++) {
        await client.send(
          new PutObjectCommand({ Bucket: S3_BUCKET, Key: `bare/s${i}`, Body: blobs[i] as Uint8Array }),
        );
      }
      const bareS3Ms = performance.now() - t;
      client.destroy();

      // Replay across the boundary: the first half only in the archive.
      const mid = segments[Math.floor(segments.length / 2)]?.firstSeq ?? Math.floor(last / 2);
      await log.jsm.streams.purge(log.stream, { seq: mid });
      ctx.progress("replay across the boundary");
      t = performance.now();
      const across = await replay(log, fleetProjection, {
        archiveSnapshots: false,
        ...replayProgress("replay across the boundary"),
      });
      const acrossMs = performance.now() - t;
      if (canonicalJson(across.state) !== canonicalJson(fromStream.state)) {
        throw new Error("the replay across the boundary differs from the replay from the stream");
      }

      // Backup and restore of the same history.
      ctx.progress("backup");
      const dir = tempDir("bench-backup");
      const out = new DirectoryArchiveStore(dir);
      t = performance.now();
      const manifest = await backupLog(log, out, {
        buckets: [],
        onProgress: (seq, of) => ctx.progress(`backup: ${n(seq)} / ${n(of)} events`),
      });
      const backupMs = performance.now() - t;
      if (manifest.events !== last) throw new Error(`the backup holds ${manifest.events} of ${last} events`);
      ctx.progress("restore");
      const restored = await openLog({
        url: target.url,
        clientName: "bench-restore",
        name: stream,
        ensure: false,
      });
      t = performance.now();
      await restoreLog(restored, out, await readManifest(out), {
        replicas: 1,
        force: false,
        onProgress: (seq) => ctx.progress(`restore: ${n(seq)} / ${n(last)} events`),
      });
      const restoreMs = performance.now() - t;
      const check = await replay(restored, fleetProjection, {
        archiveSnapshots: false,
        ...replayProgress("replay of the restored log"),
      });
      await restored.close();
      if (canonicalJson(check.state) !== canonicalJson(fromStream.state))
        throw new Error("the restored log folds differently");

      const mbps = (bytes: number, ms: number) => bytes / 2 ** 20 / (ms / 1000);
      const rate = (count: number, ms: number) => count / (ms / 1000);
      return {
        params: {
          events: last,
          nodes,
          streamBytes,
          archivedBytes,
          segments: segments.length,
          purgedBelow: mid,
        },
        figures: [
          figure(
            "archive throughput (seal, put, snapshot per segment)",
            mbps(archivedBytes, archiveMs),
            "MiB/s",
            {
              raw: { name: "bare Object Store put of the same bytes", value: mbps(archivedBytes, bareMs) },
            },
          ),
          figure("archive throughput", rate(last, archiveMs), "events/s"),
          figure(
            "archive throughput to S3 (seal, put, snapshot per segment)",
            mbps(archivedBytes, s3ArchiveMs),
            "MiB/s",
            { raw: { name: "bare S3 put of the same bytes", value: mbps(archivedBytes, bareS3Ms) } },
          ),
          figure("archive throughput to S3", rate(last, s3ArchiveMs), "events/s"),
          figure("replay across the boundary (half from the archive)", rate(last, acrossMs), "events/s", {
            raw: { name: "replay from the stream alone", value: rate(last, streamReplayMs) },
          }),
          figure(`backup of ${n(last)} events (archive + stream → directory)`, backupMs, "ms", {}),
          figure(`restore of ${n(last)} events (directory → empty NATS)`, restoreMs, "ms", {}),
        ],
        notes: [
          `${n(last)} events, ${(streamBytes / 2 ** 20).toFixed(1)} MiB in the stream, ${segments.length} segments of ≤ 8 MiB`,
          "archive throughput includes reading the stream, folding the fleet and writing a snapshot per segment",
          "S3: s3rver (a Node S3 server over a directory) as a process of its own on loopback, path-style, signed requests",
        ],
      };
    } finally {
      await log.close();
      await server.close();
      await target.close();
      await s3.close();
    }
  },
};
