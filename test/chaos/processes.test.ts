/**
 * Crashes of real processes under a working fleet, on one nats-server:
 * `llmgw gateway` ×2 and `llmgw reconciler` ×2 as child processes, simulated
 * agents over real Connect streams. Each scenario ends with the invariant
 * checker over the whole log (with the agents' record of their acks); the
 * last one runs `llmgw check-log` itself over the log they left.
 *
 * The scenarios share one world (starting processes is most of the cost) and
 * run in order. The reconnect storm has 300 agents,
 * LLMGW_CHAOS_STORM_AGENTS=1000 for more. Seeded schedules of these faults
 * (and more) run in the deterministic simulation (`llmgw simulate`,
 * test/simulation), where a seed replays exactly; what stays here is what
 * the simulation does not run: real processes, signals, sockets and NATS
 * (docs/RELIABILITY.md, "Process-level tests and the simulation").
 */
import assert from "node:assert/strict";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { openLog } from "../../src/log/index.js";
import { TEST_PAUSE_ENV } from "../../src/reconciler/runner/test-pause.js";
import { type NatsServer, startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { CHAOS_RECONCILER_CONFIG, ChaosWorld } from "../support/chaos.js";
import { logFlags, runCli } from "../support/cli.js";
import { eventually } from "../support/eventually.js";
import { EventFactory } from "../support/fleet-events.js";

const NODES = 6;
const STORM_AGENTS = Number(process.env["LLMGW_CHAOS_STORM_AGENTS"] ?? 300);

describe("chaos: process crashes under a working fleet", () => {
  let server: NatsServer & { close(): Promise<void> };
  let w: ChaosWorld;
  let replicas = 12;

  // The reconcilers' test pause point: open (passes go through) while this file exists.
  const pauseGate = join(tempDir("chaos-pause"), "open");
  writeFileSync(pauseGate, "");

  before(async () => {
    server = await startServer();
    // A 3 s heartbeat timeout leaves room for the storm's load (kills are seen at once: the TCP connection dies).
    // Assigned before start(), so `after` closes whatever did start.
    w = new ChaosWorld({
      nats: server.url,
      gateways: 2,
      reconcilers: 2,
      heartbeatTimeoutMs: 3_000,
      reconcilerEnv: { [TEST_PAUSE_ENV]: pauseGate },
    });
    await w.startRunning(NODES, replicas);
  });
  after(async () => {
    await w?.close();
    await server?.close();
  });

  /** The gateway a node's current session is on. */
  const gatewayOf = (node: string) => w.rt.state.inventory.nodes.get(node)?.session?.gatewayId;

  it("kill -9 a gateway with agents attached: they move to the other one, no shard restarts; it comes back", async () => {
    const [victim, survivor] = w.gateways as [(typeof w.gateways)[0], (typeof w.gateways)[0]];
    const held = w.rt.state.inventory.nodes.keys().filter((n) => gatewayOf(n) === victim.id);
    assert.ok(held.length > 0, "the victim holds agents");
    const killSeq = await w.log.lastSeq();
    await w.killGateway(victim);
    await eventually(() => held.every((n) => gatewayOf(n) === survivor.id), {
      what: `${held.join(", ")} to re-register on ${survivor.id}`,
    });
    // Its lease expires: the reconciler records the dead gateway's sessions as closed.
    await eventually(() => w.rt.state.inventory.gateways[victim.id]?.status === "lost", {
      what: `${victim.id} recorded as lost`,
    });
    // The reconciler has acted on the moved agents: their new sessions are adopted
    // (the replicas' phase alone does not change when a session closes).
    await w.waitAdopted(held);
    await w.waitRunning(replicas);
    assert.deepEqual(await w.startsAfter(killSeq), [], "no shard was started again after the gateway died");
    await w.restartGateway(victim);
    await w.waitConnected(NODES);
    await w.check("gateway kill -9 and restart");
  });

  it("kill -9 the leader holding a decided pass for new work: the standby takes over, no slot is started twice", async () => {
    const leader = await w.leader();
    // Without the gate file the leader holds its next decided pass before
    // the append (src/reconciler/runner/test-pause.ts): killed there, for
    // certain in the middle of acting on the new work.
    rmSync(pauseGate);
    replicas += 6;
    await w.catalog(replicas);
    await eventually(() => leader.logged(/^test pause: holding a decided pass/), {
      what: `the leader to decide a pass for the new work and hold it before the append:\n${leader.output()}`,
    });
    await leader.kill();
    writeFileSync(pauseGate, "");
    const next = await w.leader();
    assert.notEqual(next.id, leader.id);
    await w.waitRunning(replicas);
    await w.addReconciler();
    await w.check("leader kill -9 mid-pass");
  });

  it("SIGSTOP the leader past its lease, SIGCONT: it steps down and no pass of it lands after the takeover", async () => {
    const paused = await w.leader();
    paused.signal("SIGSTOP");
    const stoppedAt = await w.log.lastSeq();
    replicas += 4;
    await w.catalog(replicas);
    const other = await w.leader();
    assert.notEqual(other.id, paused.id);
    await w.waitRunning(replicas);
    paused.signal("SIGCONT");
    await eventually(() => paused.logged(/^stepping down/), {
      what: `${paused.id} to step down after SIGCONT:\n${paused.output()}`,
    });
    // More work after it woke: only the new leader may act on it.
    replicas += 2;
    await w.catalog(replicas);
    await w.waitRunning(replicas);
    const late: number[] = [];
    for await (const r of w.log.read({ fromSeq: stoppedAt + 1 }))
      if (r.event.body.case === "reconcilePass" && r.event.body.value.leaderId === paused.id)
        late.push(r.seq);
    assert.deepEqual(late, [], `no pass of the paused leader ${paused.id} after it was stopped`);
    await w.check("leader SIGSTOP past its lease and SIGCONT");
  });

  it(`a reconnect storm: ${STORM_AGENTS} agents reconnect at once, all adopted, nothing restarted`, async () => {
    const fleet = await w.addAgents(STORM_AGENTS, "storm-", {
      heartbeatMs: 1_000,
      reconnectMinMs: 200,
      reconnectMaxMs: 2_000,
      ackTimeoutMs: 20_000,
    });
    await w.waitConnected(STORM_AGENTS, "storm-", 120_000);
    // A quarter of the storm's agents run a shard to adopt.
    replicas += Math.ceil(STORM_AGENTS / 4);
    await w.catalog(replicas);
    await w.waitRunning(replicas, 120_000);
    const sessionBefore = new Map(
      w.rt.state.inventory.nodes.values().map((n) => [n.nodeId, n.session?.sessionId]),
    );
    const stormSeq = await w.log.lastSeq();
    for (const a of fleet.nodes()) fleet.restartNode(a.nodeId, { keepShards: true });
    const renewed = () =>
      w.rt.state.inventory.nodes
        .values()
        .filter(
          (n) =>
            n.nodeId.startsWith("storm-") &&
            n.session !== null &&
            n.session.sessionId !== sessionBefore.get(n.nodeId),
        ).length;
    await eventually(() => renewed() === STORM_AGENTS, {
      what: `all ${STORM_AGENTS} agents on a new session (have ${renewed()})`,
      timeoutMs: 120_000,
    });
    // "No restart" means something only once the reconciler has acted on the new sessions.
    await w.waitAdopted(
      fleet.nodes().map((a) => a.nodeId),
      120_000,
    );
    await w.waitRunning(replicas, 60_000);
    assert.deepEqual(await w.startsAfter(stormSeq), [], "no shard was started again after the storm");
    await w.check(`a reconnect storm of ${STORM_AGENTS} agents`);
  });

  it("llmgw check-log over the log the faults left: clean with the agents' acks (exit 0); a violation and bad usage", async () => {
    const dir = tempDir("chaos-check");
    const acked = join(dir, "acked.jsonl");
    // Taken before check-log reads the log: every ack in it is for a stored event.
    writeFileSync(acked, w.acked.map((a) => JSON.stringify(a)).join("\n"));
    const flags = ["--nats", server.url, "--stream", w.stream, "--subject-prefix", w.prefix];
    // With --redecide: every pass the two leaders appended through the faults is what decide makes again.
    const config = join(dir, "reconciler.json");
    writeFileSync(config, JSON.stringify(CHAOS_RECONCILER_CONFIG));
    const ok = await runCli(["check-log", ...flags, "--acked", acked, "--redecide", "--config", config], {
      timeoutMs: 120_000,
    });
    assert.equal(ok.code, 0, ok.stdout + ok.stderr);
    const summary =
      /^ok: \d+ events \(sequences 1–\d+\), \d+ sessions, (\d+) passes, \d+ acknowledged messages, (\d+) passes re-decided \((\d+) the same\): every invariant holds$/m.exec(
        ok.stdout,
      );
    assert.ok(summary, ok.stdout);
    assert.ok(Number(summary[1]) > 0);
    assert.equal(summary[2], summary[1]);
    assert.equal(summary[3], summary[1]);

    // A log with a pass decided on a position before the previous pass (two leaders at one position).
    const stream = uniqueStream("CHKBAD");
    const log = await openLog({ url: server.url, clientName: "check-bad", name: stream, prefix: "b.evt" });
    let stale: number;
    try {
      const f = new EventFactory("bad");
      await log.append(f.cordon("gpu-1"));
      const first = await log.append(f.pass([], [], 1));
      stale = (await log.append(f.pass([], [], first.seq - 1))).seq;
    } finally {
      await log.close();
    }
    const bad = await runCli(["check-log", ...logFlags(server.url, stream, "b.evt"), "--json"]);
    assert.equal(bad.code, 1, bad.stdout + bad.stderr);
    const report = JSON.parse(bad.stdout) as {
      violations: Array<{ rule: string; seq: number; message: string }>;
    };
    assert.deepEqual(
      report.violations.map((v) => [v.rule, v.seq]),
      [["fencing", stale]],
    );
    assert.match(report.violations[0]!.message, /before the previous pass/);

    // Usage: a bad --acked file is refused before anything is read (exit 2, naming the entry and field).
    const wrong = join(dir, "wrong.json");
    writeFileSync(wrong, '[{"nodeId":"gpu-1","sessionId":"s"}]');
    const usage = await runCli(["check-log", ...flags, "--acked", wrong]);
    assert.equal(usage.code, 2, usage.stdout + usage.stderr);
    assert.match(usage.stderr, /invalid --acked .*entry 0: messageId/);
  });
});
