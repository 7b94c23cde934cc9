/**
 * The archive in an S3-compatible store (`--archive s3://BUCKET/PREFIX`)
 * with real processes: a real S3 server (s3rver, signatures checked) and
 * nats-server. `llmgw archiver` seals the golden log into the bucket, in
 * order, with a snapshot at each boundary, and purges the stream;
 * `replay`, `events`, `check-log` and `log info` given the same flags read
 * across the boundary from S3. An S3 outage while archiving loses nothing
 * (the archiver backs off, the stream keeps what is not archived) and the
 * archive stays one run; so does an archiver killed with SIGKILL and
 * restarted. `backup` reads an S3 archive and `restore` writes
 * one. Bad S3 settings are CLI errors that say what to fix.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ListObjectsV2Command, S3Client } from "@aws-sdk/client-s3";
import { isLogError, type Log, openLog, S3ArchiveStore } from "../../src/log/index.js";
import { startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { type Child, sleep, spawnLlmgw } from "../harness/proc.js";
import { type S3Server, s3Env, startS3Server } from "../harness/s3.js";
import { parseLogInfo, printedSeqs, quickArchiverArgs, runCli } from "../support/cli.js";
import { eventually } from "../support/eventually.js";
import { appendRaw, readGoldenLog } from "../support/golden-log.js";
import { sideBySide } from "../support/side-by-side.js";

type NatsServer = Awaited<ReturnType<typeof startServer>>;
const SEGMENT_NAME = /^\d{16}-\d{16}-\d{16}-\d{16}$/;

/** Every key under `prefix` in `bucket`, in S3's (lexical) order. */
async function keys(s3: S3Server, bucket: string, prefix: string): Promise<string[]> {
  const client = new S3Client({
    endpoint: s3.endpoint,
    region: "us-east-1",
    forcePathStyle: true,
    credentials: s3.credentials,
  });
  try {
    const out: string[] = [];
    let token: string | undefined;
    do {
      const page = await client.send(
        new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }),
      );
      for (const o of page.Contents ?? []) if (o.Key) out.push(o.Key);
      token = page.NextContinuationToken;
    } while (token);
    return out;
  } finally {
    client.destroy();
  }
}

/** [first, last] sequence of each segment key, in order. */
function runs(segmentKeys: string[]): Array<[number, number]> {
  return segmentKeys.map((k) => {
    const name = k.split("/").at(-1) ?? "";
    assert.match(name, SEGMENT_NAME);
    const [a, b] = name.split("-");
    return [Number(a), Number(b)];
  });
}

describe("the archive in an S3-compatible store", () => {
  let nats: NatsServer;
  let s3: S3Server;
  const env = s3Env();
  before(async () => {
    nats = await startServer();
    s3 = await startS3Server({ buckets: ["llmgw-archive", "restored", "other"] });
  });
  after(async () => {
    await s3?.close();
    await nats?.close();
  });

  const logFlags = (stream: string, prefix: string) => [
    "--nats",
    nats.url,
    "--stream",
    stream,
    "--subject-prefix",
    prefix,
  ];

  it("is written in order with snapshots by the archiver, and read from S3 by replay, events, check-log and log info", async () => {
    const stream = uniqueStream("S3ARCH");
    const prefix = "s3arch.evt";
    const log = await openLog({ url: nats.url, clientName: "test", name: stream, prefix, archive: false });
    try {
      const golden = readGoldenLog();
      await appendRaw(log, golden);
      const flags = [...logFlags(stream, prefix), ...s3.archiveFlags("llmgw-archive", "fleet-a/log")];
      const cli = (...args: string[]) => runCli([...args, ...flags], { env, timeoutMs: 90_000 });
      // Independent readers run side by side (each is a process of its own).
      const [replay5, checkBefore] = await Promise.all([
        cli("replay", "--until-seq", "5", "--json"),
        cli("check-log"),
      ]);
      assert.equal(replay5.code, 0, replay5.stderr);

      const archiver = spawnLlmgw(quickArchiverArgs(flags), env);
      try {
        await archiver.waitForLine(/s3:\/\/llmgw-archive\/fleet-a\/log at http:\/\/127\.0\.0\.1:\d+/);
        await eventually(async () => (await log.bounds()).firstSeq > golden.length, {
          what: "the whole golden log archived to S3 and purged from the stream",
          timeoutMs: 60_000,
        });
      } finally {
        await archiver.stop();
      }

      // In the bucket: segments that are one run from 1 to the end, a snapshot at each boundary.
      const segments = await keys(s3, "llmgw-archive", "fleet-a/log/segments/");
      assert.ok(segments.length > 1, `segments: ${segments.join(" ")}`);
      const seqRuns = runs(segments);
      assert.equal(seqRuns[0]?.[0], 1);
      assert.equal(seqRuns.at(-1)?.[1], golden.length);
      for (let i = 1; i < seqRuns.length; i++) {
        assert.equal(seqRuns[i]?.[0], (seqRuns[i - 1]?.[1] ?? 0) + 1, `segment ${i} follows ${i - 1}`);
      }
      const snapshotSeqs = new Set(
        (await keys(s3, "llmgw-archive", "fleet-a/log/snapshots/")).map((k) =>
          Number(k.split("/").at(-1)?.split("-")[0]),
        ),
      );
      for (const [, last] of seqRuns) assert.ok(snapshotSeqs.has(last), `a snapshot at ${last}`);
      // Nothing else under the prefix (no temporary or partial objects).
      assert.equal((await keys(s3, "llmgw-archive", "fleet-a/")).length, segments.length + snapshotSeqs.size);

      // Read across the boundary, from S3 (and, last, from a prefix holding nothing).
      const [after5, events, checkAfter, info, text, elsewhere] = await Promise.all([
        cli("replay", "--until-seq", "5", "--json"),
        cli("events", "--from-seq", "1", "--json"),
        cli("check-log"),
        cli("log", "info", "--json"),
        cli("log", "info"),
        runCli(
          [
            "events",
            "--from-seq",
            "1",
            ...logFlags(stream, prefix),
            ...s3.archiveFlags("llmgw-archive", "fleet-b"),
          ],
          { env },
        ),
      ]);
      assert.equal(after5.code, 0, after5.stderr);
      assert.equal(after5.stdout, replay5.stdout);
      assert.equal(events.code, 0, events.stderr);
      assert.deepEqual(
        printedSeqs(events.stdout),
        golden.map((_, i) => i + 1),
      );
      // The golden log is synthetic (check-log has words about it): the same verdict from S3 as from the stream.
      assert.equal(checkAfter.code, checkBefore.code, checkAfter.stderr);
      assert.equal(checkAfter.stdout, checkBefore.stdout);

      assert.equal(info.code, 0, info.stderr);
      const parsed = parseLogInfo(info.stdout);
      assert.deepEqual(
        [parsed.archive.firstSeq, parsed.archive.lastSeq, parsed.stream.firstSeq, parsed.stream.lastSeq],
        [1, golden.length, golden.length + 1, golden.length],
      );
      assert.ok(parsed.archive.bytes > 0);
      assert.deepEqual(
        parsed.snapshots.map((s) => s.seq),
        [...snapshotSeqs].sort((a, b) => a - b),
      );
      assert.match(text.stdout, new RegExp(`archive \\(s3://llmgw-archive/fleet-a/log at ${s3.endpoint}\\)`));

      // A reader pointed at another (empty) prefix is refused, never silently short.
      assert.equal(elsewhere.code, 1);
      assert.match(elsewhere.stderr, /not in the archive \(s3:\/\/llmgw-archive\/fleet-b/);
    } finally {
      await log.close();
    }
  });

  it("an S3 outage while archiving loses nothing: the archiver backs off and catches up, one run, nothing twice", async () => {
    const stream = uniqueStream("S3OUT");
    const prefix = "s3out.evt";
    const log = await openLog({ url: nats.url, clientName: "test", name: stream, prefix, archive: false });
    let archiver: Child | undefined;
    try {
      const golden = readGoldenLog();
      const half = Math.floor(golden.length / 2);
      await appendRaw(log, golden.slice(0, half));
      const flags = [...logFlags(stream, prefix), ...s3.archiveFlags("other", "outage")];
      archiver = spawnLlmgw(quickArchiverArgs(flags, "--log-level", "info"), env);
      await eventually(async () => (await log.bounds()).firstSeq === half + 1, {
        what: "the first half archived and purged",
        timeoutMs: 60_000,
      });

      // S3 goes away; the rest of the log keeps coming.
      await s3.stop();
      await appendRaw(log, golden.slice(half));
      await archiver.waitForLine(/archiving failed, trying again in \d+ s/, 30_000);
      await sleep(3_000);
      // Nothing the archive does not hold has left the stream.
      assert.equal((await log.bounds()).firstSeq, half + 1);
      assert.equal((await log.bounds()).lastSeq, golden.length);

      await s3.start();
      await eventually(async () => (await log.bounds()).firstSeq === golden.length + 1, {
        what: "the rest archived and purged once S3 is back",
        timeoutMs: 90_000,
      });
    } finally {
      await archiver?.stop();
      await log.close();
    }
    const seqRuns = runs(await keys(s3, "other", "outage/segments/"));
    const covered = seqRuns.flatMap(([a, b]) => Array.from({ length: b - a + 1 }, (_, i) => a + i));
    assert.deepEqual(
      covered,
      readGoldenLog().map((_, i) => i + 1),
      "every sequence archived exactly once, in order",
    );
    const events = await runCli(
      ["events", "--json", ...logFlags(stream, prefix), ...s3.archiveFlags("other", "outage")],
      { env },
    );
    assert.equal(events.code, 0, events.stderr);
    assert.equal(events.stdout.trim().split("\n").length, covered.length);
  });

  it("an archiver killed with SIGKILL mid-way and restarted archives each sequence once", async () => {
    const stream = uniqueStream("S3KILL");
    const prefix = "s3kill.evt";
    const log = await openLog({ url: nats.url, clientName: "test", name: stream, prefix, archive: false });
    const golden = readGoldenLog();
    const flags = [...logFlags(stream, prefix), ...s3.archiveFlags("other", "killed")];
    const args = ["archiver", ...flags, "--log-max-age", "1s", "--archive-segment-bytes", "1KiB"];
    let archiver: Child | undefined;
    try {
      const half = Math.floor(golden.length / 2);
      await appendRaw(log, golden.slice(0, half));
      archiver = spawnLlmgw(args, env);
      await eventually(async () => (await keys(s3, "other", "killed/segments/")).length >= 2, {
        what: "two segments in S3",
        timeoutMs: 60_000,
      });
      // The rest arrives and the archiver dies while it reads and seals it.
      await appendRaw(log, golden.slice(half));
      await archiver.stop("SIGKILL");
      archiver = spawnLlmgw(args, env);
      await eventually(async () => (await log.bounds()).firstSeq === golden.length + 1, {
        what: "everything archived and purged after the restart",
        timeoutMs: 60_000,
      });
    } finally {
      await archiver?.stop();
      await log.close();
    }
    const covered = runs(await keys(s3, "other", "killed/segments/")).flatMap(([a, b]) =>
      Array.from({ length: b - a + 1 }, (_, i) => a + i),
    );
    assert.deepEqual(
      covered,
      golden.map((_, i) => i + 1),
      "every sequence archived exactly once, in order",
    );
  });

  it("backup reads an S3 archive and restore writes one: the same history and replay", async () => {
    const stream = uniqueStream("S3BAK");
    const prefix = "s3bak.evt";
    const target = await startServer();
    const log = await openLog({ url: nats.url, clientName: "test", name: stream, prefix, archive: false });
    const logs: Log[] = [log];
    try {
      const golden = readGoldenLog();
      const half = Math.floor(golden.length / 2);
      await appendRaw(log, golden.slice(0, half));
      const source = [...logFlags(stream, prefix), ...s3.archiveFlags("llmgw-archive", "backup-src")];
      const archiver = spawnLlmgw(quickArchiverArgs(source), env);
      try {
        await eventually(async () => (await log.bounds()).firstSeq === half + 1, {
          what: "the first half in S3 and out of the stream",
          timeoutMs: 60_000,
        });
      } finally {
        await archiver.stop();
      }
      await appendRaw(log, golden.slice(half));

      const out = join(tempDir("s3-backup"), "fleet.llmgw-backup");
      const backup = await runCli(["backup", ...source, "--out", out], { env });
      assert.equal(backup.code, 0, backup.stderr);
      assert.match(
        backup.stdout,
        new RegExp(`backed up ${golden.length} events \\(sequences 1–${golden.length}\\)`),
      );

      const restoredFlags = [
        "--nats",
        target.url,
        "--stream",
        stream,
        "--subject-prefix",
        prefix,
        ...s3.archiveFlags("restored", "copy"),
      ];
      const restore = await runCli(
        ["restore", "--in", out, "--nats", target.url, ...s3.archiveFlags("restored", "copy")],
        { env },
      );
      assert.equal(restore.code, 0, restore.stderr);
      assert.match(restore.stdout, /s3:\/\/restored\/copy/);
      // The restored history is all in the target's S3 archive: the target's stream starts after it.
      assert.equal(runs(await keys(s3, "restored", "copy/segments/")).at(-1)?.[1], golden.length);

      // Replay at three sequences and the event list, from the source and the restored log, side by side.
      const seqs = [3, half, golden.length];
      const answers = await sideBySide(
        [
          ...seqs.map((seq) => ["replay", "--until-seq", String(seq), "--json"]),
          ["events", "--json"],
        ].flatMap((args) => [source, restoredFlags].map((f) => [...args, ...f])),
        (args) => runCli(args, { env, timeoutMs: 90_000 }),
      );
      for (const [i, seq] of seqs.entries()) {
        const [a, b] = [answers[2 * i], answers[2 * i + 1]];
        assert.equal(a?.code, 0, a?.stderr);
        assert.equal(b?.code, 0, b?.stderr);
        assert.equal(b?.stdout, a?.stdout, `replay at ${seq}`);
      }
      const [ea, eb] = answers.slice(2 * seqs.length);
      assert.equal(eb?.stdout, ea?.stdout);

      // Over a non-empty S3 archive: refused without --force.
      const again = await runCli(
        ["restore", "--in", out, "--nats", target.url, ...s3.archiveFlags("restored", "copy")],
        {
          env,
        },
      );
      assert.equal(again.code, 1);
      assert.match(again.stderr, /already holds a log.*--force/);
    } finally {
      await Promise.all(logs.map((l) => l.close()));
      await target.close();
    }
  });

  it("bad S3 settings are CLI errors that name the setting or say what to fix", async () => {
    const stream = uniqueStream("S3BAD");
    const prefix = "s3bad.evt";
    const log = await openLog({ url: nats.url, clientName: "test", name: stream, prefix, archive: false });
    try {
      await appendRaw(log, readGoldenLog().slice(0, 5));
      const base = logFlags(stream, prefix);
      const info = (flags: string[], e: Record<string, string> = env) =>
        runCli(["log", "info", ...base, ...flags], { env: e, timeoutMs: 60_000 });
      const cases: Array<{ flags: string[]; env?: Record<string, string>; code: number; stderr: RegExp }> = [
        { flags: ["--archive", "s3://"], code: 2, stderr: /--archive s3:\/\/BUCKET\/PREFIX names no bucket/ },
        { flags: ["--archive", "s3:bucket"], code: 2, stderr: /--archive for S3 is s3:\/\/BUCKET\/PREFIX/ },
        {
          flags: ["--archive", "s3://Not_A_Bucket/x"],
          code: 2,
          stderr: /"Not_A_Bucket" is not an S3 bucket name/,
        },
        {
          flags: ["--archive", "s3://llmgw-archive", "--archive-s3-endpoint", "minio:9000"],
          code: 2,
          stderr: /--archive-s3-endpoint must be an http:\/\/ or https:\/\/ URL/,
        },
        {
          flags: ["--archive", "s3://llmgw-archive", "--archive-s3-endpoint", "not a url"],
          code: 2,
          stderr: /--archive-s3-endpoint must be a URL/,
        },
        {
          flags: ["--archive", "s3://llmgw-archive", "--archive-s3-region", "EU WEST"],
          code: 2,
          stderr: /--archive-s3-region must be a region name/,
        },
        {
          flags: ["--archive", "nats", "--archive-s3-endpoint", s3.endpoint],
          code: 2,
          stderr: /--archive-s3-endpoint .* is for an archive in S3/,
        },
        {
          flags: s3.archiveFlags("no-such-bucket", "x"),
          code: 1,
          stderr: /the bucket "no-such-bucket" does not exist at http:\/\/127\.0\.0\.1:\d+: create it/,
        },
        {
          flags: s3.archiveFlags("llmgw-archive", "x"),
          env: s3Env(false),
          code: 1,
          stderr: /no S3 credentials for the archive s3:\/\/llmgw-archive\/x: set AWS_ACCESS_KEY_ID/,
        },
        {
          flags: s3.archiveFlags("llmgw-archive", "x"),
          env: { ...s3Env(false), AWS_ACCESS_KEY_ID: "WRONG", AWS_SECRET_ACCESS_KEY: "WRONG" },
          code: 1,
          stderr: /S3 refused the credentials \(InvalidAccessKeyId, HTTP 403\): check AWS_ACCESS_KEY_ID/,
        },
        {
          flags: ["--archive", "s3://llmgw-archive/x", "--archive-s3-endpoint", "http://127.0.0.1:1"],
          code: 1,
          stderr:
            /the S3 endpoint http:\/\/127\.0\.0\.1:1 cannot be reached \(ECONNREFUSED\): check --archive-s3-endpoint/,
        },
      ];
      // Each case is a process of its own: they run side by side.
      const answers = await sideBySide(cases, (c) => info(c.flags, c.env));
      for (const [i, c] of cases.entries()) {
        const r = answers[i];
        assert.ok(r);
        assert.equal(r.code, c.code, `${c.flags.join(" ")}: ${r.stderr}`);
        assert.match(r.stderr, c.stderr, c.flags.join(" "));
        assert.doesNotMatch(r.stderr, /\n\s+at /, "no stack trace");
      }

      // AWS S3 (no endpoint) with no region anywhere: said before any request is made.
      const saved = { ...process.env };
      try {
        Object.assign(process.env, s3Env());
        delete process.env.AWS_REGION;
        delete process.env.AWS_DEFAULT_REGION;
        const store = new S3ArchiveStore({ bucket: "llmgw-archive", prefix: "x" });
        await assert.rejects(
          store.list("segments"),
          (err: unknown) =>
            isLogError(err, "invalid-argument") &&
            /no AWS region for the archive s3:\/\/llmgw-archive\/x: give --archive-s3-region/.test(
              err.message,
            ),
        );
        await store.close();
      } finally {
        for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
        Object.assign(process.env, saved);
      }

      // The archiver refuses to start on a store it cannot use, and says which and why.
      const archiver = spawnLlmgw(["archiver", ...base, ...s3.archiveFlags("no-such-bucket", "x")], env);
      assert.equal(await archiver.exited, 1);
      assert.match(
        archiver.output(),
        /cannot use the archive \(s3:\/\/no-such-bucket\/x at http:\/\/127\.0\.0\.1:\d+\): .*does not exist/,
      );
      assert.equal((await log.bounds()).firstSeq, 1, "nothing left the stream");
    } finally {
      await log.close();
    }
  });
});
