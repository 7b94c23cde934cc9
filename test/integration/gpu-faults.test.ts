// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the assertions
/**
 * A fault on one GPU of an 8-GPU node, end to end with every real part:
 * nats-server, a gateway, a `llmgw reconciler` process, the operator API,
 * and an agent on a real Connect stream that reports the problem in a
 * heartbeat. Only that GPU leaves placement; the replica on it is replaced
 * make-before-break (read back from the log); the operator's clear returns
 * the GPU. A GPU cordon keeps new work off one GPU and moves nothing.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { GpuProblem_Kind, ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import type { Log, LogRecord } from "../../src/log/index.js";
import { type NatsServer, startServer } from "../harness/nats.js";
import { TestAgent } from "../support/agent.js";
import { eventually } from "../support/eventually.js";
import { readAll } from "../support/gateway.js";
import { h100Registration } from "../support/sample-events.js";
import { type Stack, startStack } from "../support/stack.js";

const NODE = "gpu-a1";
const MODEL = "llama-3.1-8b";
const catalog = (replicas: number) => ({
  models: [
    {
      name: MODEL,
      replicas,
      profiles: [{ name: "tp1", gpusPerShard: 1, memoryPerGpu: "20GiB", gpuProduct: "H100" }],
    },
  ],
});

interface GpuStack {
  log: Log;
  agent: TestAgent;
  call: Stack["call"];
  /** GPU index → replica ids holding it, from the API's node view. */
  holders(): Promise<Map<number, string[]>>;
  why: Stack["why"];
}

/**
 * An agent that does what it is told: every command gets an ok result; a
 * start reports RUNNING, a drain or stop reports STOPPED. It heartbeats so
 * the session stays open.
 */
function obey(agent: TestAgent): () => void {
  const owner = new Map<string, string>();
  let handled = 0;
  const timer = setInterval(() => {
    if (agent.done) return;
    const cmds = agent.commands();
    for (; handled < cmds.length; handled++) {
      const c = cmds[handled]!;
      if (c.case === "start") {
        owner.set(c.value.shardId, c.value.replicaId);
        agent.shardStatus({ replicaId: c.value.replicaId, shardId: c.value.shardId, state: State.RUNNING });
      } else {
        const replicaId = owner.get(c.value.shardId) ?? "";
        agent.shardStatus({ replicaId, shardId: c.value.shardId, state: State.STOPPED });
      }
    }
  }, 50);
  const beat = setInterval(() => agent.done || agent.heartbeat({}), 1000);
  return () => {
    clearInterval(timer);
    clearInterval(beat);
  };
}

async function withStack(server: NatsServer, fn: (s: GpuStack) => Promise<void>): Promise<void> {
  const stack = await startStack(server.url, {
    name: "gpuf",
    gateway: { heartbeatTimeoutMs: 10_000 },
    reconciler: { commandTimeoutMs: 5000 },
  });
  let agent: TestAgent | undefined;
  let stop = () => {};
  try {
    agent = await TestAgent.connect({
      baseUrl: stack.gw.url,
      registration: h100Registration(NODE),
      autoAnswer: true,
    });
    stop = obey(agent);
    const holders = async () => {
      const n = (await stack.call("GET", `/v1/nodes/${NODE}`)).node;
      return new Map<number, string[]>(
        n.gpus.map((g: any) => [g.index, g.shards.map((s: any) => s.replicaId as string)]),
      );
    };
    await fn({ log: stack.log, agent, call: stack.call, holders, why: stack.why });
    // Every pass is what decide makes again (check-log --redecide).
    await stack.assertRedecided("a GPU fault run");
  } finally {
    stop();
    agent?.abort();
    await stack.close();
  }
}

async function until(s: GpuStack, what: string, cond: () => Promise<boolean>): Promise<void> {
  await eventually(cond, { what, timeoutMs: 30_000 }).catch(async (err) => {
    throw new Error(`${(err as Error).message}${await s.why()}`);
  });
}

async function running(s: GpuStack, n: number): Promise<any[]> {
  const rs = (await s.call("GET", "/v1/replicas")).replicas as any[];
  return rs.length === n && rs.every((r) => r.phase === "running") ? rs : [];
}

const decisionsOf = (records: LogRecord[]) =>
  records.flatMap((r) =>
    r.event.body.case === "reconcilePass"
      ? r.event.body.value.decisions.map((d) => ({ seq: r.seq, d: d.kind }))
      : [],
  );

describe("a fault on one GPU of an 8-GPU node", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("takes only that GPU out of placement, replaces its shard make-before-break, and a clear returns it", () =>
    withStack(server, async (s) => {
      await s.call("PUT", "/v1/catalog", catalog(7));
      await until(s, "seven replicas running", async () => (await running(s, 7)).length === 7);
      const before = await s.holders();
      const old = before.get(3)?.[0];
      assert.ok(old, `a replica holds GPU 3: ${JSON.stringify([...before])}`);
      const oldShard = (await s.call("GET", `/v1/replicas/${old}`)).replica.shards[0].shardId as string;

      // The agent repeats the problem on every heartbeat; the log records it once.
      const problem = {
        gpuIndex: 3,
        kind: GpuProblem_Kind.XID,
        message: "Xid 79: GPU has fallen off the bus",
      };
      for (let i = 0; i < 3; i++) s.agent.heartbeat({ gpuProblems: [problem] });

      await until(s, `${old} replaced off GPU 3`, async () => {
        const rs = await running(s, 7);
        const h = await s.holders();
        return rs.length === 7 && !rs.some((r) => r.replicaId === old) && (h.get(3) ?? []).length === 0;
      });
      const after = await s.holders();
      assert.deepEqual(
        [...after].filter(([, rs]) => rs.length > 0).map(([i]) => i),
        [0, 1, 2, 4, 5, 6, 7],
        "the other seven GPUs all hold work",
      );
      const view = (await s.call("GET", `/v1/nodes/${NODE}`)).node;
      assert.deepEqual(view.gpus[3].faults, [{ kind: "xid", message: problem.message }]);
      assert.deepEqual(view.nodeProblems, []);

      // Make-before-break, read from the log.
      const records = await readAll(s.log);
      const usage = records.filter(
        (r) => r.event.body.case === "usageChanged" && r.event.body.value.gpuProblems.length > 0,
      );
      assert.equal(usage.length, 1, "a repeated problem is recorded once");
      const decisions = decisionsOf(records);
      const created = decisions.find((x) => x.d.case === "replicaCreated" && x.d.value.replaces === old);
      assert.ok(created?.d.case === "replicaCreated", `a replacement for ${old}`);
      const replacement = created.d.value.replicaId;
      const placed = decisions.findLast(
        (x) => x.d.case === "replicaPlaced" && x.d.value.replicaId === replacement,
      );
      assert.ok(placed?.d.case === "replicaPlaced");
      assert.equal(placed.d.value.shards[0]?.nodeId, NODE, "replaced on the same node: only GPU 3 left");
      assert.ok(!placed.d.value.shards[0]?.gpuIndices.includes(3));
      const newShard = placed.d.value.shards[0]?.shardId;
      const runningAt = records.find(
        (r) =>
          r.event.body.case === "shardStatus" &&
          r.event.body.value.status?.shardId === newShard &&
          r.event.body.value.status.state === State.RUNNING,
      )?.seq;
      assert.ok(runningAt, "the replacement reported running");
      const toOld = records.flatMap((r) =>
        r.event.body.case === "reconcilePass"
          ? r.event.body.value.commands
              .filter((c) => c.action.case !== "start" && c.action.value?.shardId === oldShard)
              .map((c) => ({ seq: r.seq, kind: c.action.case }))
          : [],
      );
      assert.ok(toOld.length > 0, "the old shard was drained");
      for (const c of toOld)
        assert.ok(c.seq > runningAt, `no ${c.kind} of ${old} before its replacement ran`);
      const drained = decisions.find(
        (x) => x.d.case === "replicaDrainStarted" && x.d.value.replicaId === old,
      );
      assert.ok(drained?.d.case === "replicaDrainStarted");
      assert.match(drained.d.value.reason, /GPU 3 of gpu-a1 has a problem \(xid: Xid 79/);
      // The agent too saw the start of the replacement before the drain of the old shard.
      const seen = s.agent.commands();
      const startAt = seen.findIndex((c) => c.case === "start" && c.value.shardId === newShard);
      const drainAt = seen.findIndex((c) => c.case !== "start" && c.value.shardId === oldShard);
      assert.ok(startAt >= 0 && drainAt > startAt, `start at ${startAt}, drain at ${drainAt}`);

      // An eighth replica finds no room: GPU 3 stays out.
      await s.call("PUT", "/v1/catalog", catalog(8));
      await until(s, "the eighth replica pending", async () => {
        const rs = (await s.call("GET", "/v1/replicas")).replicas as any[];
        return rs.some((r) => r.phase === "pending" && /too few free GPUs/.test(r.pendingReason));
      });
      assert.deepEqual((await s.holders()).get(3), []);

      // The operator clears it: GPU 3 takes the pending replica.
      const cleared = await s.call("POST", `/v1/nodes/${NODE}/gpus/3/clear`, { reason: "reseated" });
      assert.deepEqual(cleared.node.gpus[3].faults, []);
      await until(s, "eight replicas running, one on GPU 3", async () => {
        const h = await s.holders();
        return (await running(s, 8)).length === 8 && (h.get(3) ?? []).length === 1;
      });
    }));

  it("a GPU cordon keeps new work off that GPU and moves nothing; uncordon lets it take work", () =>
    withStack(server, async (s) => {
      await s.call("PUT", "/v1/catalog", catalog(4));
      await until(s, "four replicas running", async () => (await running(s, 4)).length === 4);
      const before = await s.holders();
      const busy = [...before].find(([, rs]) => rs.length > 0)?.[0] as number;
      const idle = [...before].find(([, rs]) => rs.length === 0)?.[0] as number;
      await s.call("POST", `/v1/nodes/${NODE}/gpus/${busy}/cordon`, { reason: "fan" });
      const c = await s.call("POST", `/v1/nodes/${NODE}/gpus/${idle}/cordon`, { reason: "fan" });
      assert.deepEqual([c.node.gpus[idle].cordoned, c.node.gpus[idle].cordonReason], [true, "fan"]);
      await s.call("PUT", "/v1/catalog", catalog(8));
      await until(s, "the eighth replica pending", async () => {
        const rs = (await s.call("GET", "/v1/replicas")).replicas as any[];
        return rs.filter((r) => r.phase === "running").length === 7 && rs.some((r) => r.phase === "pending");
      });
      const after = await s.holders();
      assert.deepEqual(after.get(busy), before.get(busy), "what runs on a cordoned GPU stays");
      assert.deepEqual(after.get(idle), [], "a cordoned GPU takes nothing new");
      await s.call("POST", `/v1/nodes/${NODE}/gpus/${idle}/uncordon`, {});
      await until(s, "eight replicas running", async () => (await running(s, 8)).length === 8);
      assert.equal((await s.holders()).get(idle)?.length, 1);
    }));
});
