/**
 * The archiver's NATS role against a real nats-server running the
 * authorization block `llmgw nats-auth init` writes: `llmgw archiver` with
 * its own credentials archives and purges the log; the reader reads across
 * the archive boundary (replay and events as processes); no other role may
 * purge the log, and the archiver may not append to it.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { newEvent } from "../../src/codec/index.js";
import { isLogError, type Log, logErrorFrom } from "../../src/log/index.js";
import { startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { type Child, spawnLlmgw } from "../harness/proc.js";
import { parseLogInfo, printedSeqs, runCli } from "../support/cli.js";
import { eventually } from "../support/eventually.js";
import { rand } from "../support/gateway.js";
import { credsFile, natsAuthInit, openLogAs } from "../support/nats-auth.js";

type Role = "gateway" | "reconciler" | "api" | "reader" | "archiver";

describe("the archiver's NATS role (real nats-server with the generated auth config)", () => {
  const stream = uniqueStream("ARCH");
  const prefix = `arch${rand()}.evt`;
  const dir = tempDir("nats-auth-archiver");
  const creds = (role: Role) => credsFile(dir, role);
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  let archiver: Child | undefined;
  const logs: Log[] = [];
  const url = () => server?.url ?? "";
  const logFlags = () => ["--nats", url(), "--stream", stream, "--subject-prefix", prefix];
  const openAs = async (role: Role) => {
    const log = await openLogAs({ url: url(), dir, stream, prefix, role, ensure: role === "api" });
    logs.push(log);
    return log;
  };

  before(async () => {
    await natsAuthInit(dir, stream, prefix);
    server = await startServer({ include: join(dir, "auth.conf") });
  });

  after(async () => {
    await archiver?.stop().catch(() => {});
    await Promise.all(logs.map((l) => l.close()));
    await server?.close();
  });

  it("archives and purges with its own credentials; the reader reads across; nobody else purges", async () => {
    const api = await openAs("api");
    for (let i = 0; i < 40; i++) {
      await api.append(
        newEvent({
          id: `cat-${i}`,
          timeUnixMs: BigInt(Date.now()),
          body: { case: "catalogChanged", value: { appliedBy: `op-${i}` } },
        }),
      );
    }
    const before5 = await runCli([
      "replay",
      ...logFlags(),
      "--nats-creds",
      creds("reader"),
      "--until-seq",
      "5",
      "--json",
    ]);
    assert.equal(before5.code, 0, before5.stderr);

    archiver = spawnLlmgw([
      ...["archiver", ...logFlags(), "--nats-creds", creds("archiver")],
      ...["--log-max-age", "2s", "--archive-segment-bytes", "1KiB", "--metrics-listen", "127.0.0.1:0"],
    ]);
    const metricsUrl = (JSON.parse(await archiver.waitForLine(/metrics listening/)) as { metrics: string })
      .metrics;
    const reader = await openAs("reader");
    await eventually(async () => (await reader.bounds()).firstSeq > 10, {
      what: "the archiver purging the stream past sequence 10",
      timeoutMs: 30_000,
    });

    // Its metrics say where the archive ends and that it purged.
    const metrics = await (await fetch(metricsUrl)).text();
    const value = (name: string) =>
      Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(metrics)?.[1]);
    assert.ok(value("llmgw_archive_last_seq") >= 10, metrics);
    assert.ok(value("llmgw_archive_purges_total") >= 1, metrics);
    assert.ok(value("llmgw_archive_stream_first_seq") > 10, metrics);

    const withReader = [...logFlags(), "--nats-creds", creds("reader")];
    const after5 = await runCli(["replay", ...withReader, "--until-seq", "5", "--json"]);
    assert.equal(after5.code, 0, after5.stderr);
    assert.equal(after5.stdout, before5.stdout);
    const events = await runCli(["events", ...withReader, "--from-seq", "1", "--json"]);
    assert.equal(events.code, 0, events.stderr);
    assert.deepEqual(
      printedSeqs(events.stdout),
      Array.from({ length: 40 }, (_, i) => i + 1),
    );
    const info = await runCli(["log", "info", "--json", ...withReader]);
    assert.equal(info.code, 0, info.stderr);
    const parsed = parseLogInfo(info.stdout);
    assert.equal(parsed.archive.firstSeq, 1);
    assert.ok(parsed.stream.firstSeq > 10);

    for (const role of ["reader", "gateway", "reconciler", "api"] as const) {
      const log = await openAs(role);
      await assert.rejects(
        log.jsm.streams.purge(stream),
        (err) => logErrorFrom(err).code === "permission-denied",
        `a purge with the ${role}'s credentials`,
      );
    }
    const asArchiver = await openAs("archiver");
    await assert.rejects(
      asArchiver.append(newEvent({ id: `forged-${rand()}`, body: { case: "catalogChanged", value: {} } })),
      (err) => isLogError(err, "permission-denied"),
      "an event published with the archiver's credentials",
    );
  });
});
