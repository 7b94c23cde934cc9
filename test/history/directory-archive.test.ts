/**
 * The archive in a directory (`--archive dir:PATH`) with real processes:
 * `llmgw archiver` seals the golden log into the directory and purges the
 * stream; `replay`, `events` and `log info` given the same `--archive` read
 * across the boundary; the directory holds only whole segment files.
 */
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type Log, openLog } from "../../src/log/index.js";
import { startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { spawnLlmgw } from "../harness/proc.js";
import { logFlags, parseLogInfo, quickArchiverArgs, runCli } from "../support/cli.js";
import { eventually } from "../support/eventually.js";
import { appendRaw, readGoldenLog } from "../support/golden-log.js";

describe("the archive in a directory", () => {
  let server: Awaited<ReturnType<typeof startServer>>;
  let log: Log;
  const stream = uniqueStream("DIRARCH");
  const prefix = "dirarch.evt";
  before(async () => {
    server = await startServer();
    log = await openLog({ url: server.url, clientName: "test", name: stream, prefix, archive: false });
  });
  after(async () => {
    await log?.close();
    await server?.close();
  });

  it("is written by the archiver and read by every command given the same --archive", async () => {
    const golden = readGoldenLog();
    await appendRaw(log, golden);
    const dir = tempDir("dir-archive");
    const flags = [...logFlags(server.url, stream, prefix), "--archive", `dir:${dir}`];
    const before5 = await runCli(["replay", ...flags, "--until-seq", "5", "--json"]);
    assert.equal(before5.code, 0, before5.stderr);

    const archiver = spawnLlmgw(quickArchiverArgs(flags));
    try {
      await eventually(async () => (await log.bounds()).firstSeq > golden.length, {
        what: "the whole golden log archived and purged",
        timeoutMs: 30_000,
      });
    } finally {
      await archiver.stop();
    }
    const files = readdirSync(join(dir, "segments"));
    assert.ok(
      files.length > 1 && files.every((f) => /^\d{16}-\d{16}-\d{16}-\d{16}$/.test(f)),
      files.join(" "),
    );
    assert.ok(readdirSync(join(dir, "snapshots")).length >= files.length);

    const after5 = await runCli(["replay", ...flags, "--until-seq", "5", "--json"]);
    assert.equal(after5.stdout, before5.stdout);
    const events = await runCli(["events", ...flags, "--json"]);
    assert.equal(events.code, 0, events.stderr);
    assert.equal(events.stdout.trim().split("\n").length, golden.length);
    const info = await runCli(["log", "info", "--json", ...flags]);
    const parsed = parseLogInfo(info.stdout);
    assert.deepEqual(
      [parsed.archive.firstSeq, parsed.archive.lastSeq, parsed.stream.firstSeq, parsed.stream.lastSeq],
      [1, golden.length, golden.length + 1, golden.length],
    );
    assert.equal(parsed.snapshots.at(-1)?.seq, golden.length);
  });
});
