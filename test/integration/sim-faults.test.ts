/**
 * The simulator's named faults produce the events they claim, checked where
 * it matters: in the log, after going through a real gateway on a real
 * nats-server. A `SimFleet` holds real Connect streams; start commands reach
 * it the way the reconciler sends them (a `ReconcilePass` appended to the
 * log, relayed by the gateway to the node's current session).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import type { Gateway } from "../../src/gateway/index.js";
import { GpuProblem_Kind, ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { EventSchema, SessionClosed_Reason, Writer_Kind } from "../../src/gen/llmgw/v1/events_pb.js";
import { type Log, type LogRecord, openLog } from "../../src/log/index.js";
import { SimFleet } from "../../src/sim/index.js";
import { type NatsServer, startServer, uniqueStream } from "../harness/nats.js";
import { rand, startTestGateway, waitForLog } from "../support/gateway.js";

const FAULTS = {
  "node-1": "fail",
  "node-2": "crash-loop",
  "node-3": "hang",
  "node-4": "leak",
  "node-5": "xid",
  "node-6": "partition",
  // node-7 has no fault: the control that shows what a healthy start does in the same time.
} as const;

type Start = { node: string; shard: string; gpus: number[] };

let passes = 0;
/** Appends one reconciler pass with start (or stop) commands for the nodes' current sessions. */
async function appendCommands(
  log: Log,
  records: LogRecord[],
  starts: Start[],
  stops: Array<{ node: string; shard: string }> = [],
): Promise<void> {
  const n = ++passes;
  const commands = [
    ...starts.map((s, i) => ({
      commandId: `c-${n}-${i}`,
      nodeId: s.node,
      sessionId: sessionOf(records, s.node),
      attempt: 1,
      action: {
        case: "start" as const,
        value: {
          shardId: s.shard,
          replicaId: `${s.shard}-replica`,
          model: "llama-3.1-8b",
          profile: "tp1",
          gpuIndices: s.gpus,
          worldSize: 1,
        },
      },
    })),
    ...stops.map((s, i) => ({
      commandId: `c-${n}-stop-${i}`,
      nodeId: s.node,
      sessionId: sessionOf(records, s.node),
      attempt: 1,
      action: { case: "stop" as const, value: { shardId: s.shard } },
    })),
  ];
  await log.append(
    create(EventSchema, {
      id: `pass-${n}-${rand()}`,
      timeUnixMs: BigInt(Date.now()),
      writer: { kind: Writer_Kind.RECONCILER, id: "rec-test" },
      body: { case: "reconcilePass", value: { leaderId: "rec-test", trigger: "events", commands } },
    }),
  );
}

function opened(records: LogRecord[], node: string) {
  return records.flatMap((r) =>
    r.event.body.case === "sessionOpened" && r.event.body.value.nodeId === node
      ? [{ seq: r.seq, ...r.event.body.value }]
      : [],
  );
}

function sessionOf(records: LogRecord[], node: string): string {
  const last = opened(records, node).at(-1);
  if (!last) throw new Error(`no session opened for ${node}`);
  return last.sessionId;
}

function closed(records: LogRecord[], node: string) {
  return records.flatMap((r) =>
    r.event.body.case === "sessionClosed" && r.event.body.value.nodeId === node
      ? [{ seq: r.seq, ...r.event.body.value }]
      : [],
  );
}

function shardReports(records: LogRecord[], shard: string) {
  return records.flatMap((r) =>
    r.event.body.case === "shardStatus" && r.event.body.value.status?.shardId === shard
      ? [r.event.body.value.status]
      : [],
  );
}

function usage(records: LogRecord[], node: string) {
  return records.flatMap((r) =>
    r.event.body.case === "usageChanged" && r.event.body.value.nodeId === node
      ? [{ seq: r.seq, ...r.event.body.value }]
      : [],
  );
}

const states = (records: LogRecord[], shard: string) => shardReports(records, shard).map((s) => s.state);

describe("simulated faults, observed through a real gateway and the log", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("fail, crash-loop, hang, leak, xid and partition each leave their events in the log", async () => {
    const stream = uniqueStream("SIMF");
    const prefix = `f${rand()}.evt`;
    const log = await openLog({ url: server.url, clientName: "test", name: stream, prefix });
    let gw: Gateway | undefined;
    let fleet: SimFleet | undefined;
    try {
      gw = await startTestGateway({
        nats: server.url,
        stream,
        prefix,
        // Short, so a partitioned node is declared silent quickly; still ten heartbeats long.
        heartbeatTimeoutMs: 2000,
      });
      fleet = new SimFleet({
        gateways: [gw.url],
        insecureDev: true,
        nodes: 7,
        faults: Object.entries(FAULTS).map(([node, fault]) => `${fault}@${node}`),
        seed: 11,
        heartbeatMs: 200,
        startDelayMs: 300,
        failAfterMs: 200,
        crashAfterMs: 300,
        // Above the gateway's usage threshold (1 GiB): every leaking heartbeat is an event.
        leakMbPerHeartbeat: 2048,
        xidAfterHeartbeats: 3,
        partitionAfterMs: 1000,
        partitionHealMs: 300,
        reconnectMinMs: 50,
        reconnectMaxMs: 500,
        // node-5 comes up with an engine on every GPU, so the Xid kills it whichever GPU it hits.
        runningShards: {
          "node-5": [
            {
              shardId: "xid-shard",
              replicaId: "xid-replica",
              model: "llama-3.1-405b",
              profile: "tp8",
              gpuIndices: [0, 1, 2, 3, 4, 5, 6, 7],
            },
          ],
        },
      });
      await fleet.start();

      const nodes = ["node-1", "node-2", "node-3", "node-7"];
      let records = await waitForLog(
        log,
        (rs) => nodes.every((n) => opened(rs, n).length > 0),
        "sessions of the nodes that get start commands",
      );
      await appendCommands(log, records, [
        { node: "node-1", shard: "oom-shard", gpus: [0] },
        { node: "node-2", shard: "crash-shard", gpus: [0, 1] },
        { node: "node-3", shard: "hang-shard", gpus: [0, 1, 2, 3] },
        { node: "node-7", shard: "healthy-shard", gpus: [0] },
      ]);

      // fail: STARTING, then FAILED with exit code 1 and the CUDA OOM text in its last output; never RUNNING.
      records = await waitForLog(
        log,
        (rs) => states(rs, "oom-shard").includes(State.FAILED),
        "the OOM shard failing",
      );
      assert.deepEqual(states(records, "oom-shard"), [State.STARTING, State.FAILED]);
      const oom = shardReports(records, "oom-shard").at(-1)!;
      assert.match(oom.error, /the engine exited with code 1/);
      assert.equal(oom.exitCode, 1);
      assert.match(
        oom.lastOutput,
        /Engine core initialization failed\.\ntorch\.OutOfMemoryError: CUDA out of memory/,
      );

      // crash-loop: STARTING → RUNNING → FAILED with exit code 134 and the NCCL error in its last output.
      records = await waitForLog(
        log,
        (rs) =>
          states(rs, "crash-shard").includes(State.FAILED) &&
          states(rs, "healthy-shard").includes(State.RUNNING),
        "the crash-looping shard failing after running, and the healthy one running",
      );
      assert.deepEqual(states(records, "crash-shard"), [State.STARTING, State.RUNNING, State.FAILED]);
      const crash = shardReports(records, "crash-shard").at(-1)!;
      assert.match(crash.error, /the engine exited with status 134 \(killed by signal 6\)/);
      assert.match(crash.lastOutput, /engine exited unexpectedly: .*NCCL error/);
      assert.equal(crash.exitCode, 134);
      assert.deepEqual(states(records, "healthy-shard"), [State.STARTING, State.RUNNING]);

      // hang: by now a healthy start (same delay) ran and a crash-looping one ran and died;
      // the hanging one has said STARTING and nothing else.
      assert.deepEqual(states(records, "hang-shard"), [State.STARTING]);
      // "A stop still stops it."
      await appendCommands(log, records, [], [{ node: "node-3", shard: "hang-shard" }]);
      records = await waitForLog(
        log,
        (rs) => states(rs, "hang-shard").includes(State.STOPPED),
        "the hanging shard stopped on request",
      );
      assert.deepEqual(states(records, "hang-shard"), [State.STARTING, State.STOPPED]);

      // crash-loop again: every start crashes, not just the first.
      await appendCommands(log, records, [{ node: "node-2", shard: "crash-shard-2", gpus: [2] }]);

      // leak: memory use on node-4's GPUs grows, usage event after usage event.
      records = await waitForLog(log, (rs) => usage(rs, "node-4").length >= 4, "four usage events of node-4");
      const leak = usage(records, "node-4").map((u) => u.gpuMemoryUsedMb.map(Number));
      for (let i = 1; i < leak.length; i++) {
        for (let g = 0; g < 8; g++) {
          assert.ok(
            leak[i]![g]! > leak[i - 1]![g]!,
            `GPU ${g} grows from usage event ${i}: ${leak[i]![g]} > ${leak[i - 1]![g]}`,
          );
        }
      }
      assert.ok(leak.at(-1)![0]! >= 4 * 2048, `leaked at least four heartbeats' worth: ${leak.at(-1)![0]}`);

      // xid: a usage event naming the Xid as a problem of one GPU, and the engine on that GPU failed.
      records = await waitForLog(
        log,
        (rs) => usage(rs, "node-5").some((u) => u.gpuProblems.length > 0),
        "node-5's Xid in a usage event",
      );
      const xid = usage(records, "node-5").find((u) => u.gpuProblems.length > 0)!;
      assert.deepEqual(xid.newProblems, [], "tagged with its GPU, not node-level");
      assert.equal(xid.gpuProblems.length, 1);
      assert.equal(xid.gpuProblems[0]!.kind, GpuProblem_Kind.XID);
      assert.match(
        xid.gpuProblems[0]!.message,
        new RegExp(`^Xid 79: GPU has fallen off the bus \\(GPU ${xid.gpuProblems[0]!.gpuIndex}, GPU-`),
      );
      const xidSession = opened(records, "node-5")[0]!;
      assert.deepEqual(
        xidSession.registration?.runningShards.map((s) => s.shardId),
        ["xid-shard"],
        "node-5 registered with its engine running",
      );
      const xidFailed = shardReports(records, "xid-shard");
      assert.deepEqual(
        xidFailed.map((s) => s.state),
        [State.FAILED],
      );
      assert.match(xidFailed[0]!.lastOutput, /CUDA error: .*Xid 79/);
      // Only one: the problem is new once per session.
      assert.equal(usage(records, "node-5").filter((u) => u.gpuProblems.length > 0).length, 1);

      // partition: the gateway closes the silent session, and the node opens a new one later.
      records = await waitForLog(
        log,
        (rs) => {
          const c = closed(rs, "node-6").find((x) => x.reason === SessionClosed_Reason.SILENT);
          return c !== undefined && opened(rs, "node-6").some((o) => o.seq > c.seq);
        },
        "node-6 closed as silent, then a new session of node-6",
      );
      const [first, second] = opened(records, "node-6");
      const silent = closed(records, "node-6")[0]!;
      assert.equal(silent.reason, SessionClosed_Reason.SILENT);
      assert.equal(silent.sessionId, first!.sessionId);
      assert.ok(second && second.seq > silent.seq && second.sessionId !== first!.sessionId);

      // The second crash-looping start also ran, then failed.
      records = await waitForLog(
        log,
        (rs) => states(rs, "crash-shard-2").includes(State.FAILED),
        "the second crash-looping start failing",
      );
      assert.deepEqual(states(records, "crash-shard-2"), [State.STARTING, State.RUNNING, State.FAILED]);

      // Nobody but the partitioned node went silent: the short timeout is only a fault's business.
      const silentNodes = new Set(
        records.flatMap((r) =>
          r.event.body.case === "sessionClosed" && r.event.body.value.reason === SessionClosed_Reason.SILENT
            ? [r.event.body.value.nodeId]
            : [],
        ),
      );
      assert.deepEqual([...silentNodes], ["node-6"]);
      // Every command was answered, ok.
      const results = records.flatMap((r) =>
        r.event.body.case === "commandResult" ? [r.event.body.value.result] : [],
      );
      assert.equal(results.length, 6);
      assert.ok(
        results.every((r) => r?.ok),
        JSON.stringify(results),
      );
    } finally {
      await fleet?.stop();
      await gw?.drain("test over");
      await log.jsm.streams.delete(stream).catch(() => {});
      await log.close();
    }
  });
});
