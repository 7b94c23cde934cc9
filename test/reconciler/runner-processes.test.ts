/**
 * Several `llmgw reconciler` processes on one log and a real nats-server:
 * what only real processes and the real lease bucket show — a leader
 * stopped between deciding and appending is refused by the log, SIGTERM
 * hands the lease over at once, a SIGKILLed leader's key expires by the
 * bucket's TTL — and a bad config refused. Node facts are appended the way
 * a gateway would; the gateways' lease bucket holds the gateway's key like
 * a live gateway would. A killed or paused leader under a working fleet is
 * test/chaos/processes.test.ts; leader loss under seeded schedules is the
 * simulation's (docs/RELIABILITY.md, "Process-level tests and the
 * simulation").
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Kvm } from "@nats-io/kv";
import { type Log, openLog } from "../../src/log/index.js";
import { TEST_PAUSE_ENV } from "../../src/reconciler/runner/test-pause.js";
import { type NatsServer, startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { runCheckLog, runCli } from "../support/cli.js";
import { eventually } from "../support/eventually.js";
import { EventFactory, h100Node, llamaCatalog } from "../support/fleet-events.js";
import { readAll } from "../support/gateway.js";
import { passesOf, passViolations } from "../support/pass-invariants.js";
import { killAll, type ReconcilerProcess, spawnReconciler } from "../support/reconciler.js";

const rand = () => Math.random().toString(36).slice(2, 8);

describe("llmgw reconciler processes", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  /** A fresh log, a live gateway key for gw-1, and the names the reconcilers need. */
  async function setup() {
    const tag = rand();
    const stream = uniqueStream("REC");
    const prefix = `r${tag}.evt`;
    const log = await openLog({ url: server.url, clientName: "test", name: stream, prefix });
    const gatewaysBucket = `gws_${tag}`;
    const gws = await new Kvm(log.js).create(gatewaysBucket, { ttl: 120_000, history: 1 });
    await gws.put("gw-1", JSON.stringify({ gatewayId: "gw-1" }));
    const f = new EventFactory(`ev-${tag}`);
    await log.append(f.gatewayStarted("gw-1"));
    const spec = (id: string) => ({
      id,
      nats: server.url,
      stream,
      prefix,
      leaseBucket: `lease_${tag}`,
      gatewaysBucket,
      leaseTtlMs: 2000,
    });
    return { log, f, spec };
  }

  async function addNode(log: Log, f: EventFactory, node: string) {
    return await log.append(f.sessionOpened(node, `s-${node}-${rand()}`, "gw-1", h100Node(node)));
  }

  /** Starts rec-a, waits until it leads, then rec-b as its standby, on a lease of `leaseTtlMs` (into `started`, for the caller's cleanup). */
  async function aLeadingBStandingBy(
    spec: (id: string) => Parameters<typeof spawnReconciler>[0],
    leaseTtlMs: number,
    started: ReconcilerProcess[],
  ): Promise<[ReconcilerProcess, ReconcilerProcess]> {
    const a = await spawnReconciler({ ...spec("rec-a"), leaseTtlMs });
    started.push(a);
    await eventually(async () => await a.isLeader(), { what: "rec-a to lead" });
    const b = await spawnReconciler({ ...spec("rec-b"), leaseTtlMs });
    started.push(b);
    return [a, b];
  }

  it("a leader held between deciding and appending is refused by the log (wrong-last-sequence): only the standby's passes are stored", async () => {
    const { log, f, spec } = await setup();
    const release = join(tempDir("rec-pause"), "release");
    let a: ReconcilerProcess | undefined;
    let b: ReconcilerProcess | undefined;
    try {
      // rec-a holds every decided pass before its append until `release` exists
      // (src/reconciler/runner/test-pause.ts); its pass timeout outlasts the hold.
      a = await spawnReconciler({
        ...spec("rec-a"),
        env: { [TEST_PAUSE_ENV]: release },
        args: ["--pass-timeout-ms", "120000"],
      });
      await eventually(async () => await a!.isLeader(), { what: "rec-a to lead" });
      b = await spawnReconciler(spec("rec-b"));
      await log.append(f.catalog(llamaCatalog(2, 0)));
      await addNode(log, f, "gpu-a1");
      await eventually(() => a!.logged(/^test pause: holding a decided pass/), {
        what: `rec-a to decide a pass and hold it before the append:\n${a.output()}`,
      });
      // Paused where only the log stands in its way: its lease check is behind it.
      a.signal("SIGSTOP");
      await eventually(async () => passesOf(await readAll(log)).some((p) => p.pass.leaderId === "rec-b"), {
        what: `rec-b to take over and append a pass:\n${b.output()}`,
      });
      writeFileSync(release, "");
      a.signal("SIGCONT");
      const refused = () => a!.lines.find((l) => l.msg === "pass refused by the log: fencing conflict");
      await eventually(() => refused() !== undefined, {
        what: `rec-a's held append to be refused by the log:\n${a.output()}`,
      });
      assert.equal(refused()?.["code"], "wrong-last-sequence", a.output());

      const all = await readAll(log);
      const passes = passesOf(all);
      assert.ok(passes.length > 0, "the standby appended passes");
      assert.deepEqual(
        passes.filter((p) => p.pass.leaderId !== "rec-b").map((p) => `#${p.seq} by ${p.pass.leaderId}`),
        [],
        "the log holds only the standby's passes: the held leader's append was stored",
      );
      assert.deepEqual(passViolations(all), []);
      const { stream, prefix } = spec("check");
      const check = await runCheckLog({ nats: server.url, stream, prefix });
      assert.equal(check.code, 0, `check-log over the log: ${check.stdout}${check.stderr}`);
    } finally {
      await killAll([a, b]);
      await log.close();
    }
  });

  it("hands the lease over on SIGTERM: the standby, woken by the deleted key, passes well inside a 30 s TTL", async () => {
    const { log, f, spec } = await setup();
    const ttlMs = 30_000;
    const started: ReconcilerProcess[] = [];
    try {
      const [a, b] = await aLeadingBStandingBy(spec, ttlMs, started);
      await log.append(f.catalog(llamaCatalog(1, 0)));
      await addNode(log, f, "gpu-a1");
      await eventually(async () => passesOf(await readAll(log)).some((p) => p.pass.leaderId === "rec-a"), {
        what: `rec-a to append a pass:\n${a.output()}`,
      });
      a.signal("SIGTERM");
      const exit = await a.exited;
      assert.equal(exit.code, 0, a.output());
      assert.ok(a.logged("lease released"), a.output());
      // Work only a leader can answer: nobody but rec-b is left to pass.
      await log.append(f.catalog(llamaCatalog(2, 0)));
      await addNode(log, f, "gpu-a2");
      // Only the release explains a pass this soon: the key rec-a wrote lives 30 s.
      await eventually(async () => passesOf(await readAll(log)).some((p) => p.pass.leaderId === "rec-b"), {
        what: `rec-b's first pass well before the ${ttlMs} ms TTL:\n${b.output()}`,
        timeoutMs: ttlMs / 3,
      });
      const acquired = b.lines.find((l) => l.msg === "leading: lease acquired");
      assert.equal(acquired?.["after"], "release", `rec-b was woken by the key's deletion:\n${b.output()}`);
      const kv = await new Kvm(log.js).open(spec("x").leaseBucket);
      const entry = await kv.get("reconciler");
      assert.equal(entry?.operation, "PUT");
      assert.equal(JSON.parse(entry?.string() ?? "{}").holder, "rec-b", "the lease key names the successor");
      const passes = passesOf(await readAll(log));
      const first = passes.findIndex((p) => p.pass.leaderId === "rec-b");
      assert.ok(
        passes.slice(first).every((p) => p.pass.leaderId === "rec-b"),
        "no pass of rec-a after rec-b's",
      );
    } finally {
      await killAll(started);
      await log.close();
    }
  });

  it("replaces a SIGKILLed leader once its lease has expired (3 s TTL: polling, not a watch event)", async () => {
    const { log, f, spec } = await setup();
    const ttlMs = 3000;
    const started: ReconcilerProcess[] = [];
    try {
      const [a, b] = await aLeadingBStandingBy(spec, ttlMs, started);
      const kv = await new Kvm(log.js).open(spec("x").leaseBucket);
      // rec-a's key as it is before the kill: rec-a renews it at most later, so
      // the lease it holds cannot expire before this write's time plus the TTL.
      const held = await kv.get("reconciler");
      assert.equal(held?.operation, "PUT");
      assert.equal(JSON.parse(held?.string() ?? "{}").holder, "rec-a");
      await a.kill();
      await a.exited;
      // The key expires within one TTL and the standby polls at TTL/20. A
      // liveness bound of many TTLs: past it the takeover hung.
      await eventually(async () => await b!.isLeader(), {
        what: `rec-b to take over the lease of the SIGKILLed rec-a (TTL ${ttlMs} ms); it never did:\n${b.output()}`,
        timeoutMs: 20 * ttlMs,
      });
      // Taken after the key expired, not released (a SIGKILLed process releases
      // nothing), and not while rec-a's lease could still be valid. The
      // leader metric is set before the line is logged, and the line comes
      // through a pipe: it may be read a moment after the metric.
      const acquiredLine = () => b.lines.find((l) => l.msg === "leading: lease acquired");
      await eventually(() => acquiredLine() !== undefined, {
        what: `rec-b to log its lease acquisition:\n${b.output()}`,
      });
      const acquired = acquiredLine();
      assert.equal(acquired?.["after"], "poll", `rec-b found the key gone by polling:\n${b.output()}`);
      const taken = await kv.get("reconciler");
      assert.equal(JSON.parse(taken?.string() ?? "{}").holder, "rec-b", "the lease key names the successor");
      // rec-b logs the acquisition after its write is stored (both clocks are this machine's).
      const gapMs = Number(acquired?.["time"]) - held!.created.getTime();
      assert.ok(
        gapMs >= ttlMs - 1,
        `rec-b took the lease ${gapMs} ms after rec-a's write seen before the kill: within the ${ttlMs} ms TTL`,
      );
      await log.append(f.catalog(llamaCatalog(1, 0)));
      await addNode(log, f, "gpu-a1");
      await eventually(async () => passesOf(await readAll(log)).some((p) => p.pass.leaderId === "rec-b"), {
        what: `rec-b to append a pass:\n${b.output()}`,
      });
    } finally {
      await killAll(started);
      await log.close();
    }
  });

  it("refuses an invalid config file naming the field, with exit 2", async () => {
    const dir = tempDir("rec-cfg");
    const file = `${dir}/bad.yaml`;
    writeFileSync(file, "policy: binpack\nsuspectAfterMs: -5\n");
    const r = await runCli(["reconciler", "--config", file, "--nats", server.url]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /suspectAfterMs/);
    const typo = `${dir}/typo.yaml`;
    writeFileSync(typo, "polcy: spread\n");
    const r2 = await runCli(["reconciler", "--config", typo, "--nats", server.url]);
    assert.equal(r2.code, 2);
    assert.match(r2.stderr, /polcy/);
  });
});
