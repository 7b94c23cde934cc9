/**
 * Backup and restore with real processes: a log whose start is in the
 * archive (written by `llmgw archiver`, then purged from the stream) and
 * whose rest is in the stream is backed up with `llmgw backup` (to a
 * directory and to one file), restored with `llmgw restore` into fresh
 * nats-servers; the restored log holds the same events with the same
 * sequences and times, `replay` gives the same bytes at three sequences
 * (and the fold the same state at every one), `check-log` says the same.
 * A restore over a non-empty log is refused without --force.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Kvm } from "@nats-io/kv";
import { encodeEvent } from "../../src/codec/index.js";
import { type Log, openLog } from "../../src/log/index.js";
import { DEFAULT_BUCKETS } from "../../src/nats-auth/index.js";
import { canonicalJson, fleetProjection } from "../../src/projections/index.js";
import { startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { spawnLlmgw } from "../harness/proc.js";
import { quickArchiverArgs, runCli } from "../support/cli.js";
import { eventually } from "../support/eventually.js";
import { appendRaw, readGoldenLog } from "../support/golden-log.js";
import { sideBySide } from "../support/side-by-side.js";

type Server = Awaited<ReturnType<typeof startServer>>;

async function allRecords(log: Log) {
  const out: Array<{ seq: number; timeMs: number; subject: string; bytes: string }> = [];
  for await (const r of log.read()) {
    out.push({
      seq: r.seq,
      timeMs: r.timeMs,
      subject: r.subject,
      bytes: Buffer.from(encodeEvent(r.event)).toString("hex"),
    });
  }
  return out;
}

async function statesAtEverySeq(log: Log): Promise<string[]> {
  let state = fleetProjection.initialState();
  const out: string[] = [];
  for await (const r of log.read()) {
    state = fleetProjection.evolve(state, r.event, r);
    out.push(canonicalJson(state));
  }
  return out;
}

describe("backup and restore, end to end", () => {
  const servers: Server[] = [];
  const logs: Log[] = [];
  const stream = uniqueStream("BAK");
  const prefix = "bak.evt";
  before(async () => {
    for (let i = 0; i < 3; i++) servers.push(await startServer());
  });
  after(async () => {
    await Promise.all(logs.map((l) => l.close()));
    for (const s of servers) await s.close();
  });

  it("backs up archive + stream and restores them into empty servers: the same history, replay and check-log", async () => {
    const [a, b, c] = servers as [Server, Server, Server];
    const flagsOf = (s: Server) => ["--nats", s.url, "--stream", stream, "--subject-prefix", prefix];
    const open = async (s: Server) => {
      const log = await openLog({ url: s.url, clientName: "test", name: stream, prefix });
      logs.push(log);
      return log;
    };
    const golden = readGoldenLog();
    const half = Math.floor(golden.length / 2);
    const source = await open(a);
    await appendRaw(source, golden.slice(0, half));

    // The first half goes to the archive and leaves the stream.
    const archiver = spawnLlmgw(quickArchiverArgs(flagsOf(a)));
    try {
      await eventually(async () => (await source.bounds()).firstSeq === half + 1, {
        what: `the stream starting at ${half + 1}`,
        timeoutMs: 30_000,
      });
    } finally {
      await archiver.stop();
    }
    await appendRaw(source, golden.slice(half));
    const bounds = await source.bounds();
    assert.equal(bounds.firstSeq, half + 1);
    assert.equal(bounds.lastSeq, golden.length);
    const revoke = await runCli(["revoke", "gpu-stolen", "--nats", a.url, "--reason", "stolen"]);
    assert.equal(revoke.code, 0, revoke.stderr);

    const dir = join(tempDir("backup"), "dir");
    const file = join(tempDir("backup"), "fleet.llmgw-backup");
    // Processes of their own, side by side.
    const backups = await Promise.all(
      [dir, file].map((out) => runCli(["backup", ...flagsOf(a), "--out", out])),
    );
    for (const r of backups) {
      assert.equal(r.code, 0, r.stderr);
      assert.match(
        r.stdout,
        new RegExp(`backed up ${golden.length} events \\(sequences 1–${golden.length}\\)`),
      );
    }

    const [restoreFile, restoreDir] = await Promise.all([
      runCli(["restore", "--nats", b.url, "--in", file]),
      runCli(["restore", "--nats", c.url, "--in", dir]),
    ]);
    assert.equal(restoreFile.code, 0, restoreFile.stderr);
    assert.equal(restoreDir.code, 0, restoreDir.stderr);

    const want = await allRecords(source);
    const wantStates = await statesAtEverySeq(source);
    assert.equal(want.length, golden.length);
    // replay at three sequences and check-log, on the source and on each restored log:
    // the source's answers once, every process side by side.
    const seqs = [3, half, golden.length];
    const readers = (srv: Server) => [
      ...seqs.map((seq) => ["replay", ...flagsOf(srv), "--until-seq", String(seq), "--json"]),
      ["check-log", ...flagsOf(srv)],
    ];
    const per = seqs.length + 1;
    const answered = await sideBySide([a, b, c].flatMap(readers), (args) => runCli(args));
    const [fromA, fromB, fromC] = [0, 1, 2].map((k) => answered.slice(k * per, (k + 1) * per));
    for (const r of fromA?.slice(0, seqs.length) ?? []) assert.equal(r.code, 0, r.stderr);
    for (const [s, answers] of [
      [b, fromB],
      [c, fromC],
    ] as const) {
      const restored = await open(s);
      assert.deepEqual(await allRecords(restored), want);
      assert.deepEqual(await statesAtEverySeq(restored), wantStates);
      for (const [i, seq] of seqs.entries()) {
        assert.equal(answers?.[i]?.stdout, fromA?.[i]?.stdout, `replay at ${seq}`);
      }
      // The golden log is synthetic (its passes' observed sequences are made up, and check-log says so):
      // the restored log gets the same verdict, word for word. A clean one: archive-boundary.test.ts.
      const checkA = fromA?.[seqs.length];
      const checkS = answers?.[seqs.length];
      assert.equal(checkS?.code, checkA?.code);
      assert.equal(checkS?.stdout, checkA?.stdout);
      const kv = await new Kvm(restored.js).open(DEFAULT_BUCKETS.revoked);
      const values: string[] = [];
      for await (const k of await kv.keys()) values.push((await kv.get(k))?.string() ?? "");
      assert.equal(values.length, 1);
      assert.match(values[0] ?? "", /gpu-stolen/);
    }

    // Over a non-empty log: refused, unless --force.
    const again = await runCli(["restore", "--nats", b.url, "--in", dir]);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /already holds a log.*--force/);
    const forced = await runCli(["restore", "--nats", b.url, "--in", dir, "--force"]);
    assert.equal(forced.code, 0, forced.stderr);
    assert.deepEqual(await allRecords(await open(b)), want);
  });
});
