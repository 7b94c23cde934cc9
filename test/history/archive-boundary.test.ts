// biome-ignore-all lint/suspicious/noExplicitAny: API and CLI JSON bodies are loosely typed, checked by the assertions
/**
 * The bounded log with its archive, with every real part: nats-server, a
 * gateway, a `llmgw reconciler` process, the operator API, a simulated
 * fleet over Connect, and `llmgw archiver` as a process. The fleet runs past
 * the retention; the stream's first sequence moves on; `replay --until-seq
 * 5` gives the state it gave before, from the archive; `events --from-seq 1`
 * lists every sequence; `check-log` over archive and stream is clean (and
 * with `--redecide`, every pass decided again the same); the
 * catalog and the reconciler keep appending (their fencing survives their
 * last message leaving the stream). Then the archiver is killed with
 * SIGKILL mid-segment and restarted: every sequence is archived exactly once.
 * Last, `llmgw backup` and `llmgw restore` into a fresh server: the same
 * replay at three sequences, and `check-log` clean.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Archive, connectNats, defaultArchiveBucket, NatsObjectArchiveStore } from "../../src/log/index.js";
import type { SimFleet } from "../../src/sim/index.js";
import { type NatsServer, startServer, tempDir } from "../harness/nats.js";
import { type Child, sleep, spawnLlmgw } from "../harness/proc.js";
import { runCli } from "../support/cli.js";
import { eventually } from "../support/eventually.js";
import { sideBySide } from "../support/side-by-side.js";
import { h100Profile, stackFleet, startStack } from "../support/stack.js";

const catalog = (replicas: number) => ({
  models: [
    {
      name: "llama-3.3-70b",
      replicas,
      profiles: [h100Profile("tp4", 4)],
    },
  ],
});

describe("history across the archive boundary, end to end", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("a fleet run past its retention reads the same through the archive; a killed archiver archives each event once", async () => {
    const stack = await startStack(server.url, { name: "hist" });
    const { call, logFlags } = stack;
    const cli = (...args: string[]) => runCli([...args, ...logFlags], { timeoutMs: 90_000 });
    const logInfo = async () => {
      const r = await cli("log", "info", "--json");
      assert.equal(r.code, 0, r.stderr);
      return JSON.parse(r.stdout);
    };
    let fleet: SimFleet | undefined;
    let archiver: Child | undefined;
    const startArchiver = () =>
      spawnLlmgw([
        "archiver",
        ...logFlags,
        "--log-max-age",
        "6s",
        "--archive-segment-bytes",
        "16KiB",
        "--log-level",
        "info",
      ]);
    try {
      fleet = stackFleet(stack.gw.url, {
        nodes: 3,
        gpusPerNode: 4,
        seed: 35,
        heartbeatMs: 300,
        startDelayMs: 200,
        drainMs: 200,
      });
      await fleet.start();
      await call("PUT", "/v1/catalog", catalog(1));
      await eventually(
        async () => (await call("GET", "/v1/replicas")).replicas.some((r: any) => r.phase === "running"),
        {
          what: "a running replica",
        },
      );
      const [before5, { lastSeq: _l0, ...fleetAt5 }, info0] = await Promise.all([
        cli("replay", "--until-seq", "5", "--json"),
        call("GET", "/v1/fleet?at=5"),
        logInfo(),
      ]);
      assert.equal(before5.code, 0, before5.stderr);
      assert.equal(info0.stream.firstSeq, 1);
      assert.deepEqual(info0.archive, { firstSeq: 0, lastSeq: 0, bytes: 0 });

      // The archiver: retention 6 s, so segments seal every 1.5 s and leave the stream 6 s later.
      archiver = startArchiver();
      await archiver.waitForLine(/archived sequences 1…/, 30_000);
      await eventually(async () => (await logInfo()).stream.firstSeq > 5, {
        what: "the stream's first sequence past 5",
        timeoutMs: 40_000,
      });
      const info1 = await logInfo();
      assert.equal(info1.archive.firstSeq, 1);
      assert.ok(info1.archive.lastSeq >= info1.stream.firstSeq - 1, JSON.stringify(info1));
      assert.ok(info1.snapshots.length > 0 && info1.snapshots.every((s: any) => s.seq >= 1));
      assert.ok(info1.archive.bytes > 0);

      // The catalog and the reconciler append after their last messages left the stream
      // (their fencing survives it): a second replica is placed.
      await eventually(
        async () =>
          (await stack.log.lastSubjectSeq(stack.log.subjects.reconciler)) === 0 &&
          (await stack.log.lastSubjectSeq(stack.log.subjects.catalog)) === 0,
        { what: "the last pass and the last catalog archived and purged from the stream", timeoutMs: 40_000 },
      );
      await call("PUT", "/v1/catalog", catalog(2));
      await eventually(
        async () =>
          (await call("GET", "/v1/replicas")).replicas.filter((r: any) => r.phase === "running").length === 2,
        { what: "two running replicas after the catalog change", timeoutMs: 30_000 },
      );
      const info2 = await logInfo();
      assert.ok(
        info2.stream.lastSeq >= info2.stream.firstSeq,
        `the stream holds the new events: ${JSON.stringify(info2)}`,
      );

      // The same state at 5, now from the archive; with every snapshot ignored
      // (folded from the archive's first event); every sequence from 1; check-log:
      // readers of their own, side by side.
      const [after5, after5Folded, events, check] = await Promise.all([
        cli("replay", "--until-seq", "5", "--json"),
        cli("replay", "--until-seq", "5", "--json", "--no-snapshots"),
        cli("events", "--from-seq", "1", "--json"),
        cli("check-log"),
      ]);
      assert.equal(after5.code, 0, after5.stderr);
      assert.equal(after5.stdout, before5.stdout);
      // The API's time slider and event list read across the boundary too.
      const { lastSeq: _l1, ...fleetAt5Now } = await call("GET", "/v1/fleet?at=5");
      assert.deepEqual(fleetAt5Now, fleetAt5);
      const page = await call("GET", "/v1/events?from=1&limit=8");
      assert.deepEqual(
        page.events.map((e: any) => e.seq),
        [1, 2, 3, 4, 5, 6, 7, 8],
      );
      // And with every snapshot ignored: folded from the archive's first event.
      assert.equal(after5Folded.stdout, before5.stdout);

      // Every sequence from 1, across the boundary, once each and in order.
      assert.equal(events.code, 0, events.stderr);
      const seqs = events.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).seq as number);
      assert.ok(seqs.length >= info2.stream.lastSeq);
      assert.deepEqual(
        seqs,
        Array.from({ length: seqs.length }, (_, i) => i + 1),
      );

      assert.equal(check.code, 0, `${check.stdout}${check.stderr}`);
      assert.match(check.stdout, /^ok: /m);
      // And every pass, the archived ones among them, is what decide makes again (the reconciler runs the defaults).
      const redecided = await cli("check-log", "--redecide");
      assert.equal(redecided.code, 0, `${redecided.stdout}${redecided.stderr}`);
      assert.match(redecided.stdout, /, (\d+) passes re-decided \(\1 the same\): every invariant holds/);

      // Killed mid-segment (a segment seals every 1.5 s; this lands inside one), then restarted;
      // catalog changes keep events coming meanwhile.
      for (let round = 0; round < 2; round++) {
        await call("PUT", "/v1/catalog", catalog(round === 0 ? 1 : 2));
        await sleep(700);
        // Mid-segment: the stream holds events past the archive's end when the archiver dies.
        const open = await stack.log.bounds();
        const archived = await stack.log.archive?.extent({ fresh: true });
        assert.ok(
          open.lastSeq > (archived?.lastSeq ?? 0),
          `unarchived events at the kill: ${open.lastSeq} vs ${archived?.lastSeq}`,
        );
        archiver.proc.kill("SIGKILL");
        await archiver.exited;
        archiver = startArchiver();
        await archiver.waitForLine(/archiving from sequence/, 30_000);
      }
      await archiver.waitForLine(/archived sequences/, 30_000);
      await archiver.stop();
      archiver = undefined;

      // Read the archive directly: one run of segments, each sequence exactly once.
      const nc = await connectNats({ url: server.url, name: "history test" });
      try {
        const archive = new Archive(new NatsObjectArchiveStore(nc, defaultArchiveBucket(stack.stream)));
        const segments = await archive.segments({ fresh: true });
        const seen: number[] = [];
        for (const s of segments) for (const r of await archive.readSegment(s)) seen.push(r.seq);
        const last = segments.at(-1)?.lastSeq ?? 0;
        assert.deepEqual(
          seen,
          Array.from({ length: last }, (_, i) => i + 1),
        );
        assert.ok(last > info2.stream.lastSeq);
      } finally {
        await nc.close();
      }
      // Backup (archive + stream) → restore into a fresh server → the same replay at three sequences, check-log clean.
      const out = join(tempDir("history-backup"), "fleet.llmgw-backup");
      const [check2, backup] = await Promise.all([cli("check-log"), cli("backup", "--out", out)]);
      assert.equal(check2.code, 0, `${check2.stdout}${check2.stderr}`);
      assert.equal(backup.code, 0, backup.stderr);
      const m = /backed up (\d+) events \(sequences 1–(\d+)\)/.exec(backup.stdout);
      assert.ok(m, backup.stdout);
      const backedUp = Number(m[2]);
      const fresh = await startServer();
      try {
        const restore = await runCli(["restore", "--nats", fresh.url, "--in", out]);
        assert.equal(restore.code, 0, restore.stderr);
        const freshFlags = ["--nats", fresh.url, "--stream", stack.stream, "--subject-prefix", stack.prefix];
        const atSeqs = [5, Math.floor(backedUp / 2), backedUp];
        const [check3, ...replays] = await sideBySide(
          [
            () => runCli(["check-log", ...freshFlags]),
            ...atSeqs.flatMap((seq) => [
              () => cli("replay", "--until-seq", String(seq), "--json"),
              () => runCli(["replay", ...freshFlags, "--until-seq", String(seq), "--json"]),
            ]),
          ],
          (run) => run(),
        );
        for (const [i, seq] of atSeqs.entries()) {
          const x = replays[2 * i];
          const y = replays[2 * i + 1];
          assert.equal(x?.code, 0, x?.stderr);
          assert.equal(y?.stdout, x?.stdout, `replay at ${seq} after the restore`);
        }
        assert.ok(check3);
        assert.equal(check3.code, 0, `${check3.stdout}${check3.stderr}`);
        assert.match(check3.stdout, new RegExp(`^ok: ${backedUp} events`, "m"));
      } finally {
        await fresh.close();
      }
    } finally {
      await archiver?.stop().catch(() => {});
      await fleet?.stop().catch(() => {});
      await stack.close();
    }
  });
});
