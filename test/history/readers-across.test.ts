/**
 * Every reader reads across the archive boundary the same as from the
 * stream: on the golden log (a real nats-server), `explain node`,
 * `explain replica`, `what-if --json`, `events --json` and `replay --json`
 * print the same before and after the archiver moved the first half of the
 * log out of the stream (its own code, in this process); `replay
 * --until-time` of an archived time too; the projection runtime started
 * after the purge starts from the archive's snapshot and reaches the same
 * state.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Archiver } from "../../src/archiver/index.js";
import { isLogError, type Log, openLog } from "../../src/log/index.js";
import { canonicalJson, fleetProjection } from "../../src/projections/index.js";
import { ProjectionRuntime, replay } from "../../src/projections/runtime/index.js";
import { startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { runCli } from "../support/cli.js";
import { appendRaw, readGoldenLog } from "../support/golden-log.js";

describe("readers across the archive boundary", () => {
  let server: Awaited<ReturnType<typeof startServer>>;
  let log: Log;
  const stream = uniqueStream("ACROSS");
  const prefix = "across.evt";
  before(async () => {
    server = await startServer();
    log = await openLog({ url: server.url, clientName: "test", name: stream, prefix });
  });
  after(async () => {
    await log?.close();
    await server?.close();
  });

  it("explain, what-if, events, replay and the runtime print the same after the start left the stream", async () => {
    const golden = readGoldenLog();
    await appendRaw(log, golden);
    const flags = ["--nats", server.url, "--stream", stream, "--subject-prefix", prefix];
    const { state: full } = await replay(log, fleetProjection, { archiveSnapshots: false });
    const node = full.inventory.nodes.sortedKeys()[0] as string;
    const replica = full.replicas.replicas.sortedKeys()[0] as string;
    assert.ok(node && replica);
    const half = Math.floor(golden.length / 2);
    // A time inside the first half: the stream time of the event at `half`.
    let halfTimeMs = 0;
    for await (const r of log.read({ fromSeq: half, untilSeq: half })) halfTimeMs = r.timeMs;
    const config = join(tempDir("what-if"), "alt.yaml");
    writeFileSync(config, "policy: binpack\n");
    const commands = [
      ["explain", "node", node, "--json"],
      ["explain", "replica", replica, "--json"],
      ["what-if", "--json", "--config", config],
      ["events", "--json"],
      ["replay", "--json", "--until-seq", String(half - 3)],
      ["replay", "--json", "--until-time", String(halfTimeMs)],
    ];
    const run = () => Promise.all(commands.map((c) => runCli([...c, ...flags], { timeoutMs: 60_000 })));
    const beforePurge = await run();
    for (const r of beforePurge) assert.equal(r.code, 0, r.stderr);

    // The archiver's code, sealing small segments and purging what is older than 1 ms.
    const archive = log.archive;
    assert.ok(archive);
    const archiver = new Archiver(log, archive, {
      maxAgeMs: 1,
      maxBytes: 0,
      segmentBytes: 4096,
      sealAfterMs: 1,
      tickMs: 20,
    });
    const ac = new AbortController();
    const running = archiver.run(ac.signal);
    while ((await log.bounds()).firstSeq <= half) await new Promise((r) => setTimeout(r, 50));
    ac.abort();
    await running;
    assert.ok((await log.bounds()).firstSeq > half);

    const afterPurge = await run();
    afterPurge.forEach((r, i) => {
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, beforePurge[i]?.stdout, `${commands[i]?.join(" ")} across the boundary`);
    });

    // A reader pointed at another (empty) archive says what it cannot read, and reads nothing past it.
    const elsewhere = await openLog({
      url: server.url,
      clientName: "test elsewhere",
      name: stream,
      prefix,
      ensure: false,
      archive: { kind: "directory", path: tempDir("empty-archive") },
    });
    try {
      const seen: number[] = [];
      await assert.rejects(
        (async () => {
          for await (const r of elsewhere.read()) seen.push(r.seq);
        })(),
        (err) => isLogError(err, "not-found") && /sequences 1…\d+ are not in the archive/.test(err.message),
      );
      assert.deepEqual(seen, []);
      const wrong = await runCli(["replay", ...flags, "--archive", `dir:${tempDir("empty-archive")}`]);
      assert.equal(wrong.code, 1, wrong.stderr);
      assert.match(wrong.stderr, /are not in the archive .*--archive/);
    } finally {
      await elsewhere.close();
    }

    // A runtime started now: from the archive's nearest snapshot, to the same state.
    const runtime = new ProjectionRuntime(log, fleetProjection);
    await runtime.start();
    try {
      assert.ok(runtime.restoredFrom && runtime.restoredFrom.seq > 0, "started from an archive snapshot");
      assert.equal(canonicalJson(runtime.state), canonicalJson(full));
    } finally {
      await runtime.stop();
    }
  });
});
