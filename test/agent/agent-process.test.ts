// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the assertions
/**
 * The real node agent (`llmgw agent` processes) with every real part of the
 * control plane: nats-server, a gateway, a `llmgw reconciler` process and the
 * operator API; a fake nvidia-smi and the fake engine stand in for the GPUs
 * and vLLM. A catalog applied starts the engine with the templated argv, env
 * and CUDA_VISIBLE_DEVICES; the shard is RUNNING only once its health answers,
 * and routed. The agent killed with SIGKILL and started again adopts the
 * same engine process: no start or stop is sent for it.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { type NatsServer, startServer } from "../harness/nats.js";
import { commandsFor, engineRecord, pidAlive, shardStatuses, until } from "../support/agent-process.js";
import { addAgent, MODEL, startNode, tp1Catalog, withAgentWorld } from "../support/agent-world.js";
import { readAll } from "../support/gateway.js";

const NODE = "gpu-a1";

describe("llmgw agent: engines started, ready, routed and adopted across a restart (real processes)", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("starts the engine as templated, reports RUNNING after its health answers, and adopts it after kill -9", async () => {
    await withAgentWorld(server, { name: "agentp" }, async (w) => {
      const { dir, stack: s, why } = w;
      const a = await startNode(w, NODE, { gpus: [{}, {}], nvlink: [[0, 1]] });

      await s.call(
        "PUT",
        "/v1/catalog",
        tp1Catalog(1, {
          engineArgs: ["--served-model-name", "qwen"],
          engineEnv: { FAKE_ENGINE_PROFILE: "tp1" },
        }),
      );

      const running = await until(
        "the shard RUNNING in the log",
        async () => {
          const st = shardStatuses(await readAll(s.log), NODE);
          return st.find((x) => x.status.state === State.RUNNING);
        },
        { timeoutMs: 30_000, why },
      );
      const shardId = running.status.shardId;
      const all = shardStatuses(await readAll(s.log), NODE).filter((x) => x.status.shardId === shardId);
      const starting = all.find((x) => x.status.state === State.STARTING);
      assert.ok(starting && starting.seq < running.seq, "STARTING was reported before RUNNING");
      assert.ok(
        running.ms - starting.ms >= 1000,
        `RUNNING ${running.ms - starting.ms} ms after STARTING although the engine answers /health only after 1500 ms`,
      );

      const rec = engineRecord(dir, shardId);
      const enginePid = rec.pid as number;
      const argv = rec.argv as string[];
      const port = argv[argv.indexOf("--port") + 1];
      assert.deepEqual(argv.slice(argv.indexOf("--model"), argv.indexOf("--model") + 4), [
        "--model",
        MODEL,
        "--tp",
        "1",
      ]);
      assert.deepEqual(
        argv.slice(-2),
        ["--served-model-name", "qwen"],
        "the profile's engine_args are appended",
      );
      assert.equal(rec.env.FAKE_ENGINE_PROFILE, "tp1");
      assert.match(rec.env.CUDA_VISIBLE_DEVICES, /^GPU-0000000[01]-aaaa-bbbb-cccc-00000000000[01]$/);
      assert.equal(running.status.endpoint, `http://127.0.0.1:${port}`);
      assert.equal((await fetch(`${running.status.endpoint}/health`)).status, 200);

      await until(
        "the endpoint in the routing table",
        async () => {
          const t = (await s.call("GET", "/v1/endpoints")) as any;
          return JSON.stringify(t).includes(running.status.endpoint) ? true : undefined;
        },
        { timeoutMs: 20_000, why },
      );

      // The agent dies; its engine must not.
      a.proc.kill("SIGKILL");
      await a.exited;
      assert.ok(pidAlive(enginePid), "the engine outlived its agent");
      const killedAt = (await readAll(s.log)).at(-1)!.seq;
      addAgent(w, { nodeId: NODE });
      const again = await until(
        "a new session registering the running shard",
        async () => {
          const recs = await readAll(s.log);
          return recs.find(
            (r) =>
              r.seq > killedAt &&
              r.event.body.case === "sessionOpened" &&
              r.event.body.value.nodeId === NODE &&
              r.event.body.value.registration?.runningShards.some((x) => x.shardId === shardId),
          );
        },
        { timeoutMs: 30_000, why },
      );
      const reg =
        again.event.body.case === "sessionOpened" ? again.event.body.value.registration! : undefined;
      const adopted = reg!.runningShards.find((x) => x.shardId === shardId)!;
      assert.equal(adopted.state, State.RUNNING);
      assert.equal(adopted.endpoint, running.status.endpoint);
      // A pass that saw the new session: adoption has been decided.
      await until(
        "a reconcile pass after the new session",
        async () => {
          const recs = await readAll(s.log);
          return recs.some((r) => r.seq > again.seq && r.event.body.case === "reconcilePass")
            ? true
            : undefined;
        },
        { timeoutMs: 30_000, why },
      );
      const recs = await readAll(s.log);
      assert.deepEqual(
        commandsFor(recs, shardId, killedAt),
        [],
        "no start, stop or drain for the adopted shard",
      );
      assert.equal(engineRecord(dir, shardId).pid, enginePid, "the engine was not started again");
      assert.ok(pidAlive(enginePid), "the same engine process still runs");
      const ready = (await s.call("GET", "/v1/replicas")).models.find((m: any) => m.model === MODEL);
      assert.equal(ready.ready, 1, "the adopted replica is still ready");
    });
  });
});
