// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the assertions
/**
 * Liveness after ready on real nodes, with every real part of the control
 * plane (nats-server, a gateway, a `llmgw reconciler` process, the operator
 * API) and real `llmgw agent` processes on a fake nvidia-smi and the fake
 * engine, whose /health can stop answering while its process lives:
 *
 * - a wedged engine leaves `/v1/endpoints` within interval × threshold
 *   (plus a probe's timeout and a pass), is reported FAILED with the
 *   reason, and its replica is placed again and runs (`replace`);
 * - an engine whose health comes back before the threshold stays;
 * - with `restart-in-place`, the same shard is started again on its GPU
 *   and runs, back in the routing table, nothing FAILED;
 * - a StopShard relayed while a restart in place is under way (its old
 *   process still going) calls the restart off: no process is left, and
 *   the shard ends STOPPED, never RUNNING after.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { EventSchema, Writer_Kind } from "../../src/gen/llmgw/v1/events_pb.js";
import { type NatsServer, startServer } from "../harness/nats.js";
import { engineRecord, fakeGpuUuid, pidAlive, shardStatuses, until } from "../support/agent-process.js";
import {
  type AgentWorld,
  MODEL,
  runningShards,
  startNode,
  tp1Catalog,
  withAgentWorld,
} from "../support/agent-world.js";
import { readAll } from "../support/gateway.js";
import type { Stack } from "../support/stack.js";

const LIVENESS = { intervalMs: 300, timeoutMs: 200, failureThreshold: 3 };
/** interval × threshold, a probe's timeout, and a reconcile pass with room to spare. */
const OUT_OF_ROUTING_WITHIN_MS = LIVENESS.intervalMs * LIVENESS.failureThreshold + LIVENESS.timeoutMs + 3000;

/** Starts an agent for `node` on one GPU whose engine takes `engineFlags`. */
async function addNode(
  w: AgentWorld,
  node: string,
  engineFlags: string[],
  engine: Record<string, unknown> = {},
) {
  const dir = join(w.dir, node);
  mkdirSync(dir);
  await startNode(w, node, {
    gpus: [{}],
    config: { startDelayMs: 200, engineFlags, engine: { liveness: LIVENESS, ...engine } },
    dir,
  });
  return dir;
}

const routed = async (s: Stack, endpoint: string) =>
  JSON.stringify(await s.call("GET", "/v1/endpoints")).includes(endpoint);

/** When the engine's /health stopped answering, watched from outside. */
async function wedgedAt(endpoint: string, w: AgentWorld): Promise<number> {
  return until(
    "the engine's health to stop answering",
    async () => {
      try {
        const r = await fetch(`${endpoint}/health`, { signal: AbortSignal.timeout(150) });
        await r.body?.cancel();
        return undefined;
      } catch {
        return Date.now();
      }
    },
    { timeoutMs: 20_000, why: w.why },
  );
}

describe("llmgw agent: liveness after ready (real processes)", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("takes a wedged engine out of the routing table and replaces it; one that recovers in time stays", async () => {
    // The crash path's backoff and cooldown apply, made short here (a crash test's settings).
    await withAgentWorld(
      server,
      { name: "aglive", reconciler: { crashBackoffBaseMs: 500, cooldownMs: 0 } },
      async (w) => {
        const wedgeDir = await addNode(w, "gpu-wedge", [
          "--wedge-after-ms",
          "2500",
          "--wedge-once",
          join(w.dir, "wedged"),
        ]);
        void wedgeDir;
        await addNode(w, "gpu-blip", ["--wedge-after-ms", "2500", "--recover-after-ms", "350"]);
        await w.stack.call("PUT", "/v1/catalog", tp1Catalog(2));
        const [wedged, blip] = await until(
          "a shard RUNNING and routed on each node",
          async () => {
            const a = (await runningShards(w, "gpu-wedge"))[0];
            const b = (await runningShards(w, "gpu-blip"))[0];
            if (!a || !b) return undefined;
            return (await routed(w.stack, a.status.endpoint)) && (await routed(w.stack, b.status.endpoint))
              ? ([a, b] as const)
              : undefined;
          },
          { timeoutMs: 30_000, why: w.why },
        );
        const blipRecovered = wedgedAt(blip.status.endpoint, w);
        const since = await wedgedAt(wedged.status.endpoint, w);
        const gone = await until(
          "the wedged endpoint out of /v1/endpoints",
          async () => ((await routed(w.stack, wedged.status.endpoint)) ? undefined : Date.now()),
          { timeoutMs: 20_000, why: w.why },
        );
        assert.ok(
          gone - since <= OUT_OF_ROUTING_WITHIN_MS,
          `out of the routing table ${gone - since} ms after its health stopped answering`,
        );
        const failed = await until(
          "the wedged shard FAILED with the reason",
          async () =>
            shardStatuses(await readAll(w.stack.log), "gpu-wedge").find(
              (x) => x.status.shardId === wedged.status.shardId && x.status.state === State.FAILED,
            ),
          { timeoutMs: 10_000, why: w.why },
        );
        assert.match(failed.status.error, /^unhealthy: health probe failed 3 times in a row/);
        assert.ok(
          failed.ms <= gone + 1000,
          "FAILED was said before it left the table (nothing restarted first)",
        );
        const replacement = await until(
          "a replacement RUNNING and routed",
          async () => {
            const r = (await runningShards(w, "gpu-wedge")).find(
              (x) => x.status.shardId !== wedged.status.shardId,
            );
            return r && (await routed(w.stack, r.status.endpoint)) ? r : undefined;
          },
          { timeoutMs: 40_000, why: w.why },
        );
        assert.notEqual(replacement.status.shardId, wedged.status.shardId);

        // The other engine's health stopped answering too, but came back in time.
        await blipRecovered;
        assert.ok(await routed(w.stack, blip.status.endpoint), "the engine that recovered is still routed");
        const blipStatuses = shardStatuses(await readAll(w.stack.log), "gpu-blip").filter(
          (x) => x.status.shardId === blip.status.shardId,
        );
        assert.deepEqual(
          blipStatuses.map((x) => State[x.status.state]),
          ["STARTING", "RUNNING"],
          "nothing happened to it",
        );
        const recs = await readAll(w.stack.log);
        const explained = recs.some(
          (r) =>
            r.event.body.case === "reconcilePass" &&
            r.event.body.value.decisions.some((d) => /unhealthy: health probe failed/.test(d.explanation)),
        );
        assert.ok(explained, "a decision explains the replica's failure with the reason");
      },
    );
  });

  it("with restart-in-place, starts the same shard again on its GPU: out of routing, then back, nothing FAILED", async () => {
    await withAgentWorld(server, { name: "aginplace" }, async (w) => {
      const dir = await addNode(
        w,
        "gpu-inplace",
        ["--wedge-after-ms", "2000", "--wedge-once", join(w.dir, "wedged")],
        {
          restartPolicy: "restart-in-place",
        },
      );
      await w.stack.call("PUT", "/v1/catalog", tp1Catalog(1));
      const first = await until(
        "the shard RUNNING and routed",
        async () => {
          const a = (await runningShards(w, "gpu-inplace"))[0];
          return a && (await routed(w.stack, a.status.endpoint)) ? a : undefined;
        },
        { timeoutMs: 30_000, why: w.why },
      );
      const pid = engineRecord(dir, first.status.shardId).pid;
      const since = await wedgedAt(first.status.endpoint, w);
      const gone = await until(
        "the endpoint out of /v1/endpoints",
        async () => ((await routed(w.stack, first.status.endpoint)) ? undefined : Date.now()),
        { timeoutMs: 20_000, why: w.why },
      );
      assert.ok(
        gone - since <= OUT_OF_ROUTING_WITHIN_MS,
        `out of routing ${gone - since} ms after the wedge`,
      );
      const back = await until(
        "the same shard RUNNING again and routed",
        async () => {
          const st = shardStatuses(await readAll(w.stack.log), "gpu-inplace").filter(
            (x) => x.status.shardId === first.status.shardId && x.status.state === State.RUNNING,
          );
          const again = st.at(-1);
          return st.length >= 2 && again && (await routed(w.stack, again.status.endpoint))
            ? again
            : undefined;
        },
        { timeoutMs: 30_000, why: w.why },
      );
      assert.equal(back.status.shardId, first.status.shardId);
      const statuses = shardStatuses(await readAll(w.stack.log), "gpu-inplace");
      const restarting = statuses.find((x) => x.status.state === State.STARTING && x.status.error !== "");
      assert.match(
        restarting?.status.error ?? "",
        /^unhealthy, restarting in place \(1 of 3\): health probe failed/,
      );
      assert.deepEqual(
        statuses.filter((x) => x.status.state === State.FAILED).map((x) => x.status.error),
        [],
        "nothing FAILED",
      );
      const rec = engineRecord(dir, first.status.shardId);
      assert.notEqual(rec.pid, pid, "a new engine process");
      assert.equal(rec.env.CUDA_VISIBLE_DEVICES, fakeGpuUuid(0), "on the same GPU");
      const replica = ((await w.stack.call("GET", "/v1/replicas")).models as any[]).find(
        (m) => m.model === MODEL,
      );
      assert.equal(replica.ready, 1, "the replica is ready again");
    });
  });

  it("with restart-in-place, a StopShard during the restart calls it off: no process left, STOPPED, never RUNNING after", async () => {
    await withAgentWorld(server, { name: "agstoprace" }, async (w) => {
      const node = "gpu-stoprace";
      // The old engine ignores SIGTERM: the restart waits for the stop grace, and the StopShard comes meanwhile.
      const dir = await addNode(
        w,
        node,
        ["--wedge-after-ms", "1500", "--wedge-once", join(w.dir, "wedged"), "--ignore-sigterm"],
        { restartPolicy: "restart-in-place", stopGraceSeconds: 2 },
      );
      await w.stack.call("PUT", "/v1/catalog", tp1Catalog(1));
      const first = await until("the shard RUNNING", async () => (await runningShards(w, node))[0], {
        timeoutMs: 30_000,
        why: w.why,
      });
      const shardId = first.status.shardId;
      const oldPid = engineRecord(dir, shardId).pid;
      const restarting = await until(
        "the restart in place under way",
        async () =>
          shardStatuses(await readAll(w.stack.log), node).find(
            (x) => x.status.shardId === shardId && /restarting in place/.test(x.status.error),
          ),
        { timeoutMs: 20_000, why: w.why },
      );
      assert.ok(pidAlive(oldPid), "the old engine still goes (it ignores SIGTERM)");

      // A StopShard for it, relayed by the gateway over the agent's stream.
      const records = await readAll(w.stack.log);
      const opened = records.flatMap((r) =>
        r.event.body.case === "sessionOpened" && r.event.body.value.nodeId === node
          ? [r.event.body.value]
          : [],
      );
      const sessionId = opened.at(-1)?.sessionId ?? "";
      const commandId = `stop-${randomUUID()}`;
      await w.stack.log.append(
        create(EventSchema, {
          id: randomUUID(),
          timeUnixMs: BigInt(Date.now()),
          writer: { kind: Writer_Kind.RECONCILER, id: "test" },
          body: {
            case: "reconcilePass",
            value: {
              commands: [
                {
                  commandId,
                  nodeId: node,
                  sessionId,
                  attempt: 1,
                  action: { case: "stop", value: { commandId, shardId } },
                },
              ],
            },
          },
        }),
      );
      const result = await until(
        "the agent's answer to the StopShard",
        async () =>
          (await readAll(w.stack.log)).flatMap((r) =>
            r.event.body.case === "commandResult" && r.event.body.value.result?.commandId === commandId
              ? [r.event.body.value.result]
              : [],
          )[0],
        { timeoutMs: 10_000, why: w.why },
      );
      assert.equal(result.ok, true, result.error);
      await until(
        "the shard STOPPED",
        async () =>
          shardStatuses(await readAll(w.stack.log), node).some(
            (x) => x.status.shardId === shardId && x.seq > restarting.seq && x.status.state === State.STOPPED,
          ) || undefined,
        { timeoutMs: 10_000, why: w.why },
      );
      // Long enough for a restarted engine to start (200 ms) and be probed ready.
      await new Promise((r) => setTimeout(r, 1500));
      const after = shardStatuses(await readAll(w.stack.log), node).filter(
        (x) => x.status.shardId === shardId && x.seq > restarting.seq,
      );
      assert.deepEqual(
        after.map((x) => State[x.status.state]),
        ["STOPPED"],
        "nothing of the shard after the restart began but STOPPED",
      );
      const rec = engineRecord(dir, shardId);
      assert.equal(rec.pid, oldPid, "no engine process started again");
      assert.equal(pidAlive(oldPid), false, "the old engine is gone");
    });
  });
});
