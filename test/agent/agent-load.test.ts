// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the assertions
/**
 * Serving load and drains on a real node, with every real part of the
 * control plane (nats-server, a gateway, a `llmgw reconciler` process, the
 * operator API) and a real `llmgw agent` process on a fake nvidia-smi and
 * the fake engine:
 *
 * - an engine whose metrics say `vllm:num_requests_waiting 7` is a
 *   `UsageChanged` with that shard's queue depth 7 in the log, and its
 *   autoscaled model scales up to a second replica that runs;
 * - a drain of an idle engine ends in seconds, not at its deadline, and the
 *   shard is STOPPED; an engine with a request in flight is stopped only
 *   after it has answered.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { type NatsServer, startServer } from "../harness/nats.js";
import { shardStatuses, until } from "../support/agent-process.js";
import {
  type AgentWorld,
  MODEL,
  runningShards,
  startNode,
  tp1Catalog,
  tp1Profile,
  withAgentWorld,
} from "../support/agent-world.js";
import { readAll } from "../support/gateway.js";
import type { StackOptions } from "../support/stack.js";

const NODE = "gpu-load1";

/** A stack and one agent on two GPUs, registered; everything goes whatever happens. */
async function withNode(server: NatsServer, o: StackOptions, body: (w: AgentWorld) => Promise<void>) {
  await withAgentWorld(server, o, async (w) => {
    await startNode(w, NODE, {
      gpus: [{}, {}],
      config: { startDelayMs: 300, engine: { metrics: { intervalMs: 300 }, drain: { idleGraceMs: 1000 } } },
    });
    await body(w);
  });
}

describe("llmgw agent: serving load and drains (real processes)", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("reports the engine's waiting requests in usage events, and its autoscaled model scales up", async () => {
    await withNode(server, { name: "agload" }, async (w) => {
      await w.stack.call("PUT", "/v1/catalog", {
        models: [
          {
            name: MODEL,
            replicas: 1,
            profiles: [tp1Profile({ engineArgs: ["--waiting", "7", "--kv-cache-use", "0.3"] })],
            autoscale: {
              min: 1,
              max: 2,
              metric: "queue_depth",
              target: 2,
              stabilization: "1s",
              scaleUpCooldown: "1s",
            },
          },
        ],
      });
      const first = await until("the shard RUNNING", async () => (await runningShards(w, NODE))[0], {
        timeoutMs: 30_000,
        why: w.why,
      });
      const usage = await until(
        "a UsageChanged with the shard's queue depth 7",
        async () =>
          (await readAll(w.stack.log)).find(
            (r) =>
              r.event.body.case === "usageChanged" &&
              r.event.body.value.nodeId === NODE &&
              r.event.body.value.shardLoad.some(
                (l) => l.shardId === first.status.shardId && l.queueDepth === 7,
              ),
          ),
        { timeoutMs: 20_000, why: w.why },
      );
      const load =
        usage.event.body.case === "usageChanged"
          ? usage.event.body.value.shardLoad.find((l) => l.shardId === first.status.shardId)
          : undefined;
      assert.ok(Math.abs((load?.kvCacheUse ?? 0) - 0.3) < 1e-9, "the KV cache use came along");

      const scaled = await until(
        "an autoscale decision up to 2",
        async () => {
          for (const r of await readAll(w.stack.log)) {
            if (r.event.body.case !== "reconcilePass") continue;
            const d = r.event.body.value.decisions.find((d) => d.kind.case === "autoscaleDecided");
            if (d?.kind.case === "autoscaleDecided" && d.kind.value.to === 2) return d;
          }
          return undefined;
        },
        { timeoutMs: 30_000, why: w.why },
      );
      assert.match(scaled.explanation, /queue_depth/);
      await until(
        "a second shard RUNNING on the real agent",
        async () => ((await runningShards(w, NODE)).length >= 2 ? true : undefined),
        { timeoutMs: 30_000, why: w.why },
      );
    });
  });

  it("ends the drain of an idle engine in seconds, STOPPED; one with a request in flight only after it answered", async () => {
    const drainDeadlineMs = 60_000;
    await withNode(server, { name: "agidle", reconciler: { drainDeadlineMs } }, async (w) => {
      await w.stack.call("PUT", "/v1/catalog", tp1Catalog(2, { engineArgs: ["--request-ms", "4000"] }));
      const shards = await until(
        "two shards RUNNING",
        async () => {
          const r = await runningShards(w, NODE);
          return r.length >= 2 ? r : undefined;
        },
        { timeoutMs: 30_000, why: w.why },
      );
      const [busy, idle] = shards as [(typeof shards)[0], (typeof shards)[0]];
      let answeredAt = 0;
      const request = fetch(`${busy.status.endpoint}/v1/completions`, { method: "POST" }).then((r) => {
        answeredAt = Date.now();
        return r.status;
      });
      await new Promise((r) => setTimeout(r, 300));
      // The model leaves the catalog: both replicas are drained.
      await w.stack.call("PUT", "/v1/catalog", { models: [] });
      const ended = await until(
        "both shards ended",
        async () => {
          const st = shardStatuses(await readAll(w.stack.log), NODE);
          const end = (id: string) =>
            st.find(
              (x) =>
                x.status.shardId === id &&
                (x.status.state === State.STOPPED || x.status.state === State.FAILED),
            );
          const a = end(busy.status.shardId);
          const b = end(idle.status.shardId);
          return a && b ? { busy: a, idle: b, all: st } : undefined;
        },
        { timeoutMs: 30_000, why: w.why },
      );
      const drainingAt = (id: string) =>
        ended.all.find((x) => x.status.shardId === id && x.status.state === State.DRAINING)!.ms;
      assert.equal(ended.idle.status.state, State.STOPPED, "the idle shard ended STOPPED");
      assert.equal(ended.busy.status.state, State.STOPPED, "the busy shard ended STOPPED");
      const idleTook = ended.idle.ms - drainingAt(idle.status.shardId);
      assert.ok(idleTook < 15_000, `the idle drain took ${idleTook} ms: it waited for the deadline`);
      assert.equal(await request, 200, "the request in flight was answered");
      assert.ok(
        answeredAt > 0 && answeredAt <= ended.busy.ms,
        `the busy engine stopped ${answeredAt - ended.busy.ms} ms before its request was answered`,
      );
      assert.ok(ended.busy.ms - drainingAt(busy.status.shardId) < drainDeadlineMs / 2, "not at the deadline");
    });
  });
});
