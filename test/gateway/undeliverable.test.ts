/**
 * A command for a session that just ended is known at once: the gateway
 * that held the session writes CommandUndeliverable, and the reconciler's
 * next pass re-plans the replica elsewhere. Real nats-server, a real
 * gateway, real Connect streams and a real `llmgw reconciler` process.
 *
 * The race is made deterministic: the pass that places the replica is
 * decided (by the real decide, on the real projected log) while the node's
 * session is open, and appended after its stream has ended, which is what
 * happens when an agent drops right after placement.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { newEvent } from "../../src/codec/index.js";
import type { Gateway } from "../../src/gateway/index.js";
import {
  CommandUndeliverable_Action,
  CommandUndeliverable_Reason,
  ReplicaFailed_Reason,
  Writer_Kind,
} from "../../src/gen/llmgw/v1/events_pb.js";
import { checkLog } from "../../src/invariants/index.js";
import type { Log, LogRecord } from "../../src/log/index.js";
import { evolveFleet, type FleetState, initialFleet } from "../../src/projections/index.js";
import { DEFAULT_RECONCILER_CONFIG, type DecideOutput, decide } from "../../src/reconciler/index.js";
import { TestAgent } from "../support/agent.js";
import { rand, readAll, startTestGateway, waitForLog } from "../support/gateway.js";
import { killAll, type ReconcilerProcess, spawnReconciler } from "../support/reconciler.js";
import { h100Registration } from "../support/sample-events.js";
import { openTestLog, serverSuite } from "../support/suites.js";

const GIB = 1024;
const MODEL = "llama-3.1-8b";
const CATALOG = {
  models: [
    {
      name: MODEL,
      replicas: 1,
      profiles: [
        { name: "tp1", shards: 1, gpusPerShard: 1, memoryPerGpuMb: BigInt(20 * GIB), gpuProduct: "H100" },
      ],
    },
  ],
};

function fold(records: LogRecord[]): FleetState {
  let s = initialFleet();
  for (const r of records) s = evolveFleet(s, r.event, { seq: r.seq, timeMs: r.timeMs });
  return s;
}

let passes = 0;

/** One pass of the real decide on the log as it is now, and the event the leader would append for it. */
async function decideNow(log: Log, gatewayId: string): Promise<{ out: DecideOutput; observedSeq: number }> {
  const records = await readAll(log);
  const state = fold(records);
  const out = decide({
    state,
    config: DEFAULT_RECONCILER_CONFIG,
    nowMs: Date.now(),
    liveGateways: new Set([gatewayId]),
  });
  return { out, observedSeq: state.seq };
}

async function appendPass(log: Log, p: { out: DecideOutput; observedSeq: number }): Promise<number> {
  const n = ++passes;
  const { seq } = await log.append(
    newEvent({
      id: `test-pass-${rand()}-${n}`,
      timeUnixMs: BigInt(Date.now()),
      writer: { kind: Writer_Kind.TOOL, id: "test-leader" },
      body: {
        case: "reconcilePass",
        value: {
          leaderId: "test-leader",
          observedSeq: BigInt(p.observedSeq),
          nowUnixMs: BigInt(Date.now()),
          decisions: p.out.decisions,
          commands: p.out.commands,
          trigger: "events",
        },
      },
    }),
  );
  return seq;
}

describe("gateway: undeliverable commands", () => {
  const env = serverSuite();

  it("a start for a session that just ended is reported within a second, and the next pass re-plans it elsewhere", async () => {
    const { log, stream, prefix } = await openTestLog(env.server.url, "UNDL");
    const gatewaysBucket = `gwl_${rand()}`;

    let gw: Gateway | undefined;
    let rec: ReconcilerProcess | undefined;
    const agents: TestAgent[] = [];
    try {
      gw = await startTestGateway({ nats: env.server.url, stream, prefix, leaseBucket: gatewaysBucket });
      const gatewayId = gw.config.id;
      for (const node of ["gpu-u1", "gpu-u2"]) {
        agents.push(
          await TestAgent.connect({
            baseUrl: gw.url,
            registration: h100Registration(node, []),
            autoAnswer: true,
          }),
        );
      }
      await log.append(
        newEvent({
          id: `catalog-${rand()}`,
          timeUnixMs: BigInt(Date.now()),
          writer: { kind: Writer_Kind.OPERATOR, id: "ops" },
          body: { case: "catalogChanged", value: { appliedBy: "ops", catalog: CATALOG } },
        }),
      );
      // Adoption of both registrations first, as the reconciler does.
      const adoption = await decideNow(log, gatewayId);
      assert.deepEqual(
        adoption.out.decisions.map((d) => d.kind.case),
        ["shardsAdopted", "shardsAdopted"],
      );
      await appendPass(log, adoption);

      // Decided while both sessions are open: the replica is placed on one node.
      const placing = await decideNow(log, gatewayId);
      assert.deepEqual(
        placing.out.decisions.map((d) => d.kind.case),
        ["replicaCreated", "replicaPlaced"],
      );
      const start = placing.out.commands[0];
      assert.ok(start?.action.case === "start");
      const gone = agents.find((a) => a.nodeId === start.nodeId)!;
      const other = agents.find((a) => a.nodeId !== start.nodeId)!;
      assert.equal(start.sessionId, gone.sessionId);

      // The node's stream ends; its SessionClosed is stored, then the pass.
      await gone.close();
      await waitForLog(
        log,
        (rs) =>
          rs.some(
            (r) => r.event.body.case === "sessionClosed" && r.event.body.value.sessionId === gone.sessionId,
          ),
        `the SessionClosed of ${gone.nodeId}`,
      );
      const passSeq = await appendPass(log, placing);

      const isReport = (r: LogRecord) =>
        r.event.body.case === "commandUndeliverable" && r.event.body.value.commandId === start.commandId;
      const records = await waitForLog(
        log,
        (rs) => rs.some(isReport),
        `a CommandUndeliverable for ${start.commandId}`,
      );
      const report = records.find(isReport)!;
      const pass = records.find((r) => r.seq === passSeq)!;
      assert.ok(
        report.timeMs - pass.timeMs < 1_000,
        `the report was stored ${report.timeMs - pass.timeMs} ms after the pass (seq ${passSeq}); it should take well under a second`,
      );
      assert.equal(report.subject, `${prefix}.gateway.${gatewayId}`);
      assert.ok(report.event.body.case === "commandUndeliverable");
      const v = report.event.body.value;
      assert.equal(v.reason, CommandUndeliverable_Reason.SESSION_CLOSED);
      assert.equal(v.action, CommandUndeliverable_Action.START);
      assert.equal(v.attempt, 1);
      assert.equal(v.nodeId, gone.nodeId);
      assert.equal(v.sessionId, gone.sessionId);
      assert.equal(v.gatewayId, gatewayId);
      assert.equal(v.shardId, start.action.value.shardId);
      assert.equal(v.replicaId, start.action.value.replicaId);
      assert.equal(v.passSeq, BigInt(passSeq));
      assert.match(
        v.detail,
        new RegExp(`session ${gone.sessionId} of ${gone.nodeId} ended on gateway ${gatewayId}`),
      );

      // The next pass, by a real reconciler, re-plans the replica on the other node.
      rec = await spawnReconciler({
        id: "rec-undl",
        nats: env.server.url,
        stream,
        prefix,
        leaseBucket: `rl_${rand()}`,
        gatewaysBucket,
      });
      const replica = start.action.value.replicaId;
      const after = await waitForLog(
        log,
        (rs) =>
          rs.some(
            (r) =>
              r.seq > report.seq &&
              r.event.body.case === "reconcilePass" &&
              r.event.body.value.decisions.some((d) => d.kind.case === "replicaPlaced"),
          ),
        `a pass after seq ${report.seq} that places ${replica} again`,
      ).catch((err: Error) => {
        throw new Error(`${err.message}\nreconciler:\n${rec?.output()}`);
      });
      const next = after.find((r) => r.seq > report.seq && r.event.body.case === "reconcilePass")!;
      assert.ok(next.event.body.case === "reconcilePass");
      const decisions = next.event.body.value.decisions;
      assert.deepEqual(
        decisions.map((d) => d.kind.case),
        ["undeliverableHandled", "replicaFailed", "replicaPlaced"],
      );
      const handled = decisions[0]!;
      assert.ok(handled.kind.case === "undeliverableHandled");
      assert.equal(handled.kind.value.commandId, start.commandId);
      const failed = decisions[1]!;
      assert.ok(failed.kind.case === "replicaFailed");
      assert.equal(failed.kind.value.replicaId, replica);
      assert.match(failed.kind.value.error, /^start command undeliverable: session .* ended on gateway/);
      assert.equal(failed.kind.value.reason, ReplicaFailed_Reason.UNDELIVERABLE);
      const placed = decisions[2]!;
      assert.ok(placed.kind.case === "replicaPlaced");
      assert.equal(placed.kind.value.replicaId, replica);
      assert.equal(placed.kind.value.shards[0]?.nodeId, other.nodeId);
      await other.waitFor((m) => m.msg.case === "start" && m.msg.value.replicaId === replica, {
        what: `the start of ${replica} on ${other.nodeId}`,
      });

      const all = await readAll(log);
      assert.equal(all.filter(isReport).length, 1, "reported once");
      const state = fold(all);
      assert.deepEqual(state.replicas.undeliverable, {});
      assert.deepEqual(state.replicas.failures, {}, "not counted toward the model×node cooldown");
      assert.deepEqual(checkLog(all).violations, []);
    } finally {
      await killAll([rec]);
      for (const a of agents) a.abort();
      await gw?.drain("test over");
      await log.jsm.streams.delete(stream).catch(() => {});
      await log.close();
    }
  });
});
