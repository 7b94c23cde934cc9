import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { headers } from "@nats-io/transport-node";
import { type Log, type LogRecord, openLog } from "../../src/log/index.js";
import {
  canonicalJson,
  type FleetJson,
  type FleetState,
  fleetProjection,
  foldFleet,
} from "../../src/projections/index.js";
import { openKvSnapshotStore } from "../../src/projections/runtime/index.js";
import { type NatsServer, startServer, uniqueStream } from "../harness/nats.js";
import { LLMGW_BIN, runCli } from "../support/cli.js";
import { EventFactory } from "../support/fleet-events.js";
import { appendRaw, GOLDEN_REPLAY, maskStreamTimes, readGoldenLog } from "../support/golden-log.js";

interface ReplayJson {
  seq: number;
  timeMs: number;
  time: string;
  state: FleetJson;
}

describe("llmgw replay and events against a real nats-server (the golden log)", () => {
  let server: NatsServer & { close(): Promise<void> };
  let log: Log;
  let records: LogRecord[];
  const bucket = `snap_golden_${process.pid}`;
  const cli = (...args: string[]) =>
    runCli([...args, "--nats", server.url, "--stream", log.stream], { timeoutMs: 60_000 });

  before(async () => {
    server = await startServer();
    log = await openLog({ url: server.url, clientName: "test", name: uniqueStream("GOLDEN") });
    await appendRaw(log, readGoldenLog());
    records = [];
    for await (const r of log.read()) records.push(r);
  });
  after(async () => {
    await log?.close();
    await server?.close();
  });

  it("replays the golden log recorded by an earlier version to the recorded state", async () => {
    const r = await cli("replay", "--json");
    assert.equal(r.code, 0, r.stderr);
    // Its one event of a kind from a future version is passed over and counted.
    assert.match(r.stderr, /passed over 1 event\(s\) of a kind this version does not know/);
    const got = JSON.parse(r.stdout) as ReplayJson;
    const expected = JSON.parse(readFileSync(GOLDEN_REPLAY, "utf8"));
    assert.equal(
      canonicalJson(maskStreamTimes(got)),
      canonicalJson(expected),
      "the golden log no longer replays to the recorded state: a change broke old events (see test/fixtures/README.md)",
    );
    // What the mask hid are real stream times of this log.
    const first = records[0]!.timeMs;
    const last = records.at(-1)!.timeMs;
    assert.equal(got.timeMs, last);
    for (const n of Object.values(got.state.inventory.nodes)) {
      for (const t of [n.session?.openedAtMs, n.disconnectedSinceMs]) {
        if (t !== undefined && t !== null)
          assert.ok(t >= first && t <= last, `stream time ${t} out of range`);
      }
    }
    // The CLI's output is the same fold as the library's.
    assert.equal(canonicalJson(got.state), canonicalJson(foldFleet(records)));
  });

  it("--until-seq shows exactly the state at that point, from an earlier snapshot or from the start", async () => {
    const prefix = (n: number) => canonicalJson(foldFleet(records.filter((r) => r.seq <= n)));
    const snaps = await openKvSnapshotStore<FleetState>(log, { bucket });
    assert.ok(snaps);
    for (const at of [10, 40]) {
      await snaps.save(fleetProjection, { seq: at, timeMs: records[at - 1]!.timeMs }, prefix(at));
    }
    const [fromSnapshot, full] = await Promise.all([
      cli("replay", "--json", "--until-seq", "25", "--snapshot-bucket", bucket),
      cli("replay", "--json", "--until-seq", "25", "--snapshot-bucket", bucket, "--no-snapshots"),
    ]);
    for (const r of [fromSnapshot, full]) {
      assert.equal(r.code, 0, r.stderr);
      const got = JSON.parse(r.stdout) as ReplayJson;
      assert.equal(got.seq, 25);
      assert.equal(got.timeMs, records[24]!.timeMs);
      assert.equal(canonicalJson(got.state), prefix(25));
    }
    assert.match(fromSnapshot.stderr, /snapshot at sequence 10/);
    assert.doesNotMatch(full.stderr, /snapshot/);
  });

  it("--until-time folds the events stored up to that time (ISO or ms)", async () => {
    const t = records[29]!.timeMs;
    const expected = records.filter((r) => r.timeMs <= t);
    const [iso, ms] = await Promise.all([
      cli("replay", "--json", "--until-time", new Date(t).toISOString()),
      cli("replay", "--json", "--until-time", String(t)),
    ]);
    for (const r of [iso, ms]) {
      assert.equal(r.code, 0, r.stderr);
      const got = JSON.parse(r.stdout) as ReplayJson;
      assert.equal(got.seq, expected.at(-1)!.seq);
      assert.equal(canonicalJson(got.state), canonicalJson(foldFleet(expected)));
    }
  });

  it("filters by node and by replica; prints the fleet for people", async () => {
    const [node, nodeEarlier, replica, text] = await Promise.all([
      cli("replay", "--json", "--node", "h100-a4"),
      // Before a4's session expired with its gateway (seq 44), its stop command c-6 was in flight.
      cli("replay", "--json", "--node", "h100-a4", "--until-seq", "40"),
      cli("replay", "--json", "--replica", "r-405b-1"),
      cli("replay"),
    ]);
    assert.equal(node.code, 0, node.stderr);
    const n = (JSON.parse(node.stdout) as ReplayJson).state;
    assert.deepEqual(Object.keys(n.inventory.nodes), ["h100-a4"]);
    assert.deepEqual(Object.keys(n.replicas.replicas), ["r-70b-3"]);
    assert.deepEqual(Object.keys(n.replicas.commands), [], "commands of the expired session are dropped");
    assert.equal(nodeEarlier.code, 0, nodeEarlier.stderr);
    const e = (JSON.parse(nodeEarlier.stdout) as ReplayJson).state;
    assert.deepEqual(Object.keys(e.inventory.nodes), ["h100-a4"]);
    assert.deepEqual(Object.keys(e.replicas.commands), ["c-6"]);

    assert.equal(replica.code, 0, replica.stderr);
    const r = (JSON.parse(replica.stdout) as ReplayJson).state;
    assert.deepEqual(Object.keys(r.replicas.replicas), ["r-405b-1"]);
    assert.deepEqual(Object.keys(r.inventory.nodes).sort(), ["h100-a1", "h100-a2"]);

    assert.equal(text.code, 0, text.stderr);
    const out = text.stdout;
    assert.match(out, /^Fleet at sequence 51 /);
    assert.match(out, /h100-b1 {2}lost {2}no session \(last closed: silent/);
    assert.match(out, /cordoned \(firmware update\)/);
    assert.match(out, /h100-a3 .*cordoned \(RMA: Xid 79\), draining/);
    assert.match(out, /node problems: Xid 79: GPU has fallen off the bus/);
    assert.match(
      out,
      /gpu4 +NVIDIA H100 80GB HBM3 +71\.0\/80\.0 GiB +ok +r-70b-3\/r-70b-3\.0 llama-3\.3-70b \(running\)/,
    );
    assert.match(out, /r-405b-1\.1 +rank 1 +on h100-a2 +gpus 0,1,2,3,4,5,6,7 +running, adopted/);
    assert.match(out, /pending: 0\/5 nodes fit: 2 too few free GPUs, 1 lost, 1 draining, 1 no session/);
  });

  it("events: one line per event, the unknown kind shown as such; --json; --subject; --from-seq", async () => {
    const [text, json, sessions, tail] = await Promise.all([
      cli("events"),
      cli("events", "--json"),
      cli("events", "--subject", "session.*", "--json"),
      cli("events", "--from-seq", "50"),
    ]);
    assert.equal(text.code, 0, text.stderr);
    const lines = text.stdout.trimEnd().split("\n");
    assert.equal(lines.length, 51);
    assert.match(
      lines[3]!,
      /^ +4 {2}\S+Z {2}llmgw\.evt\.session\.h100-a1 {2}sessionOpened {2}h100-a1 session s-a1-1 on gw-1 \(mtls\): 8 GPU\(s\), running nothing$/,
    );
    assert.match(lines[46]!, /^ +47 .* unknown {2}an event kind this version does not know/);

    assert.equal(json.code, 0, json.stderr);
    const objs = json.stdout
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      objs.map((o) => o.seq),
      records.map((r) => r.seq),
    );
    assert.equal(objs[2].kind, "catalogChanged");
    assert.equal(objs[2].event.catalogChanged.catalog.models[1].name, "llama-3.1-405b");
    assert.equal(
      objs[2].event.catalogChanged.catalog.models[1].profiles[0].memoryPerGpuMb,
      String(76 * 1024),
    );
    assert.equal(objs[8].event.reconcilePass.decisions.length, 5);

    const kinds = sessions.stdout
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l).subject.split(".")[2]);
    assert.ok(kinds.length > 0 && kinds.every((k) => k === "session"));

    assert.deepEqual(
      tail.stdout
        .trimEnd()
        .split("\n")
        .map((l) => l.trim().split(/\s+/)[0]),
      ["50", "51"],
    );
  });

  it("bad input exits 2 naming the flag; an unreachable NATS exits 1 saying how to fix it", async () => {
    const [abc, both, time, node, replica, unreachable, noStream] = await Promise.all([
      cli("replay", "--until-seq", "abc"),
      cli("replay", "--until-seq", "3", "--until-time", "2026-01-01T00:00:00Z"),
      cli("replay", "--until-time", "yesterday"),
      cli("replay", "--node", "gpu-nope"),
      cli("replay", "--replica", "r-nope"),
      runCli(["replay", "--nats", "nats://127.0.0.1:1"]),
      runCli(["events", "--nats", server.url, "--stream", "NO_SUCH_STREAM"]),
    ]);
    assert.equal(abc.code, 2);
    assert.match(abc.stderr, /--until-seq must be a non-negative integer, got "abc"/);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /--until-seq .* cannot be used with .*--until-time/);
    assert.equal(time.code, 2);
    assert.match(time.stderr, /--until-time must be an ISO time .* got "yesterday"/);
    assert.equal(node.code, 2);
    assert.match(node.stderr, /no such node "gpu-nope" .*known: h100-a1, h100-a2/);
    assert.equal(replica.code, 2);
    assert.match(replica.stderr, /no such replica "r-nope"/);
    assert.equal(unreachable.code, 1);
    assert.equal(unreachable.stderr.trim().split("\n").length, 1);
    assert.match(unreachable.stderr, /cannot connect to NATS at nats:\/\/127\.0\.0\.1:1.*--nats/);
    assert.equal(noStream.code, 1);
    assert.match(noStream.stderr, /no stream "NO_SUCH_STREAM".*--stream/);
  });
});

describe("llmgw events on a live log", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("shows malformed messages with their sequence instead of skipping them", async () => {
    const log = await openLog({ url: server.url, clientName: "test", name: uniqueStream("M") });
    try {
      const f = new EventFactory("m");
      await log.append(f.cordon("a1"));
      const h = headers();
      h.set("Nats-Msg-Id", "garbage");
      await log.js.publish(log.subjects.operator("a1"), new TextEncoder().encode("\u00ff not an event"), {
        headers: h,
      });
      await log.append(f.uncordon("a1"));
      const args = ["--nats", server.url, "--stream", log.stream];
      const [text, json, replay] = await Promise.all([
        runCli(["events", ...args]),
        runCli(["events", "--json", ...args]),
        runCli(["replay", "--json", ...args]),
      ]);
      assert.equal(text.code, 0, text.stderr);
      const lines = text.stdout.trimEnd().split("\n");
      assert.equal(lines.length, 3);
      assert.match(lines[1]!, /^ +2 .* MALFORMED {2}undecodable message at sequence 2/);
      const objs = json.stdout
        .trimEnd()
        .split("\n")
        .map((l) => JSON.parse(l));
      assert.equal(objs[1].seq, 2);
      assert.match(objs[1].malformed, /sequence 2/);
      assert.equal(replay.code, 0, replay.stderr);
      assert.match(replay.stderr, /malformed message at sequence 2/);
      assert.equal((JSON.parse(replay.stdout) as ReplayJson).state.inventory.nodes["a1"]?.cordoned, false);
    } finally {
      await log.jsm.streams.delete(log.stream).catch(() => {});
      await log.close();
    }
  });

  it("--follow prints new events as they are appended, until interrupted", async () => {
    const log = await openLog({ url: server.url, clientName: "test", name: uniqueStream("F") });
    const child = spawn(
      process.execPath,
      [LLMGW_BIN, "events", "--follow", "--nats", server.url, "--stream", log.stream],
      {
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    try {
      let out = "";
      let err = "";
      child.stdout.on("data", (b) => (out += b));
      child.stderr.on("data", (b) => (err += b));
      const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
      const f = new EventFactory("f");
      const deadline = Date.now() + 30_000;
      // The follower may start after the first append; it reads from the start, so either way it sees it.
      await log.append(f.cordon("a1", "first"));
      while (!/cordoned by alice: first/.test(out)) {
        assert.ok(Date.now() < deadline, `no line for the first event within 30 s: ${out}${err}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      await log.append(f.drain("a2", "second"));
      while (!/drain requested by bob: second/.test(out)) {
        assert.ok(Date.now() < deadline, `no line for the second event within 30 s: ${out}${err}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      child.kill("SIGINT");
      assert.equal(await exited, 0, err);
      assert.equal(out.trimEnd().split("\n").length, 2);
    } finally {
      child.kill("SIGKILL");
      await log.jsm.streams.delete(log.stream).catch(() => {});
      await log.close();
    }
  });
});
