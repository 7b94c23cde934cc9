// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the assertions
/**
 * A command result binds only from the node and session its command was
 * addressed to. Command ids are predictable, so a node with a valid
 * certificate could otherwise answer another node's start with `ok: false`
 * and fail its replica. Real nats-server, gateway, `llmgw reconciler`
 * process and API; two agents over real streams: the reconciler places a
 * replica on the victim and sends it a start; another node answers that
 * start. The forged result is stored (it is what the node said) but changes
 * nothing in the folded state, is counted, and `check-log` names it; the
 * victim's own answer then binds and the replica comes up.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { checkLog } from "../../src/invariants/index.js";
import { canonicalJson, foldFleet } from "../../src/projections/index.js";
import { type NatsServer, startServer } from "../harness/nats.js";
import { TestAgent } from "../support/agent.js";
import { readAll } from "../support/gateway.js";
import { h100Registration } from "../support/sample-events.js";
import { type Stack, startStack } from "../support/stack.js";

const VICTIM = "gpu-victim";
const MALLORY = "gpu-mallory";
const MODEL = "llama-3.1-8b";

describe("command results bound to the node and session they were sent to (real gateway and reconciler)", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("a CommandResult for another node's command changes nothing, is counted and reported by check-log", async () => {
    let stack: Stack | undefined;
    const agents: TestAgent[] = [];
    const beats: NodeJS.Timeout[] = [];
    try {
      stack = await startStack(server.url, {
        name: "rbind",
        gateway: { heartbeatTimeoutMs: 10_000 },
        reconciler: { commandTimeoutMs: 60_000 },
      });
      const s = stack;
      const victim = await TestAgent.connect({ baseUrl: s.gw.url, registration: h100Registration(VICTIM) });
      agents.push(victim);
      beats.push(setInterval(() => victim.done || victim.heartbeat({}), 1000));
      await s.call("PUT", "/v1/catalog", {
        models: [
          {
            name: MODEL,
            replicas: 1,
            profiles: [{ name: "tp1", gpusPerShard: 1, memoryPerGpu: "20GiB", gpuProduct: "H100" }],
          },
        ],
      });
      const started = await victim.waitFor((m) => m.msg.case === "start", {
        what: "the start",
        timeoutMs: 30_000,
      });
      assert.ok(started.msg.case === "start");
      const start = started.msg.value;

      // Another node, with its own valid session, answers the victim's start.
      const mallory = await TestAgent.connect({ baseUrl: s.gw.url, registration: h100Registration(MALLORY) });
      agents.push(mallory);
      beats.push(setInterval(() => mallory.done || mallory.heartbeat({}), 1000));
      const forged = mallory.commandResult({
        commandId: start.commandId,
        ok: false,
        error: "CUDA error: out of memory (not really)",
      });
      await mallory.waitForAck(forged);
      const records = await readAll(s.log);
      const forgedRecord = records.find(
        (r) =>
          r.event.body.case === "commandResult" &&
          r.event.body.value.nodeId === MALLORY &&
          r.event.body.value.result?.commandId === start.commandId,
      );
      assert.ok(forgedRecord, "the forged result is stored: it is what that node said");

      // The fold: byte-identical to the same log without it, but for the count.
      const withForged = foldFleet(records);
      const without = foldFleet(records.filter((r) => r.seq !== forgedRecord.seq));
      const refused = withForged.replicas.refusedResults?.[MALLORY];
      assert.deepEqual(refused, {
        nodeId: MALLORY,
        count: 1,
        lastSeq: forgedRecord.seq,
        lastCommandId: start.commandId,
        lastSessionId: mallory.sessionId,
        addressedNodeId: VICTIM,
        addressedSessionId: victim.sessionId,
      });
      // The fold's position (seq, time) is the last record's; all else must be the same.
      const { refusedResults: _counted, ...rest } = withForged.replicas;
      const { seq: _s1, timeMs: _t1, ...forgedState } = { ...withForged, replicas: rest };
      const { seq: _s2, timeMs: _t2, ...cleanState } = without;
      assert.ok(
        canonicalJson(forgedState) === canonicalJson(cleanState),
        "the forged result changed nothing in the folded state but its count",
      );
      assert.ok(withForged.replicas.commands[start.commandId], "the start still waits for its answer");
      const shard = withForged.replicas.replicas
        .get(start.replicaId)
        ?.shards.find((x) => x.shardId === start.shardId);
      assert.equal(shard?.fault, null, "no fault on the victim's shard");
      assert.equal(shard?.lastError, "");

      const report = checkLog(records.map((r) => ({ seq: r.seq, timeMs: r.timeMs, event: r.event })));
      const flagged = report.violations.filter((v) => v.rule === "result-not-addressed");
      assert.equal(flagged.length, 1, JSON.stringify(report.violations));
      assert.equal(flagged[0]!.seq, forgedRecord.seq);
      assert.match(flagged[0]!.message, new RegExp(`from ${MALLORY} .* addressed to ${VICTIM}`));

      // The victim's own answer binds: the start is answered, the replica comes up, never failed.
      victim.commandResult({ commandId: start.commandId, ok: true });
      victim.shardStatus({ replicaId: start.replicaId, shardId: start.shardId, state: State.RUNNING });
      const deadline = Date.now() + 30_000;
      for (;;) {
        const m = ((await s.call("GET", "/v1/replicas")).models as any[]).find((x) => x.model === MODEL);
        if (m?.ready === 1) break;
        if (Date.now() > deadline) throw new Error(`the replica never became ready${await s.why()}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const all = await readAll(s.log);
      const failedDecisions = all.flatMap((r) =>
        r.event.body.case === "reconcilePass"
          ? r.event.body.value.decisions.filter((d) => d.kind.case === "replicaFailed")
          : [],
      );
      assert.deepEqual(failedDecisions, [], "no replica failed by the forged result");
      assert.equal(foldFleet(all).replicas.commands[start.commandId], undefined, "answered by its own node");
    } finally {
      for (const b of beats) clearInterval(b);
      for (const a of agents) a.abort();
      await stack?.close();
    }
  });
});
