// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the assertions
/**
 * The routing table under churn, with every real part: nats-server, a
 * gateway, a `llmgw reconciler` process keeping the llmgw_endpoints KV
 * bucket, the operator API and a simulated fleet over Connect. Replicas are
 * placed (one of them across two nodes), a node is drained and another
 * comes back empty. Throughout, the KV bucket follows the table the passes
 * record, a replica is listed only once all its shards run, and a draining
 * one leaves the bucket before its agent receives the DrainShard.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { jetstream } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { checkLog } from "../../src/invariants/index.js";
import type { LogRecord } from "../../src/log/index.js";
import { ApiClient } from "../../src/operator/index.js";
import type { EndpointEntry } from "../../src/projections/index.js";
import { EndpointsBucket, modelOfEndpointsKey } from "../../src/reconciler/runner/index.js";
import type { SimFleet } from "../../src/sim/index.js";
import { type NatsServer, startServer } from "../harness/nats.js";
import { eventually } from "../support/eventually.js";
import { rand, readAll } from "../support/gateway.js";
import { h100Profile, type Stack, stackFleet, startStack } from "../support/stack.js";

const SMALL = "llama-3.1-8b";
const BIG = "llama-3.1-405b";
const CATALOG = {
  models: [
    {
      name: SMALL,
      replicas: 3,
      profiles: [h100Profile("tp2", 2)],
    },
    {
      name: BIG,
      replicas: 1,
      profiles: [
        {
          name: "tp4-pp2",
          shards: 2,
          gpusPerShard: 4,
          memoryPerGpu: "64GiB",
          gpuProduct: "H100",
          fabricKind: "infiniband",
        },
      ],
    },
  ],
};

type Table = Record<string, EndpointEntry[]>;

/** One change of a key as the watcher saw it, in the order this process saw everything. */
interface KvChange {
  order: number;
  model: string;
  replicas: string[];
  createdMs: number;
}

const ids = (list: EndpointEntry[] | undefined) => (list ?? []).map((e) => e.replicaId);

function passesOf(records: LogRecord[]) {
  return records.flatMap((r) =>
    r.event.body.case === "reconcilePass" ? [{ r, p: r.event.body.value }] : [],
  );
}

describe("the routing table under churn (KV bucket, API, real stream)", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("keeps the bucket equal to the table, lists only ready replicas and drops a draining one before its drain", async () => {
    const endpointsBucket = `endp_${rand()}`;
    const nc = await connect({ servers: server.url });
    let stack: Stack | undefined;
    let fleet: SimFleet | undefined;
    let stopWatch: (() => void) | undefined;
    const follow = new AbortController();
    let order = 0;
    const kv: KvChange[] = [];
    const drainsReceived: Array<{ order: number; shardId: string }> = [];
    const followed: any[] = [];
    const call = (method: string, path: string, body?: unknown) => stack!.call(method, path, body);
    const replicas = async (): Promise<any[]> => (await call("GET", "/v1/replicas")).replicas;
    const why = async () =>
      `\nendpoints: ${JSON.stringify(await call("GET", "/v1/endpoints").catch(() => null))}${await stack?.why()}`;
    try {
      // The bucket is made (as the reconciler would) and watched before anything is placed.
      const bucket = await EndpointsBucket.open(jetstream(nc), { bucket: endpointsBucket });
      const watch = await bucket.kv.watch({});
      stopWatch = () => watch.stop();
      void (async () => {
        for await (const e of watch) {
          kv.push({
            order: ++order,
            model: modelOfEndpointsKey(e.key),
            replicas: e.operation === "PUT" ? ids(e.json<EndpointEntry[]>()) : [],
            createdMs: e.created.getTime(),
          });
        }
      })();

      // Left by an earlier leader for a model the log no longer routes to: the new leader's sync deletes it.
      await bucket.kv.put(
        "retired-model",
        JSON.stringify([{ replicaId: "r-old", url: "http://x:1", nodeId: "x" }]),
      );

      // Two reconcilers: the leader is stopped halfway and the other keeps the bucket from then on.
      stack = await startStack(server.url, {
        name: "endp",
        reconciler: { policy: "spread", commandTimeoutMs: 5000, suspectAfterMs: 10_000, lostAfterMs: 20_000 },
        reconcilerArgs: ["--endpoints-bucket", endpointsBucket],
      });
      const { rec, log, gw, api } = stack;
      const standby = await stack.standby("rec-endp-b");
      // The SSE follow mode, read as `llmgw endpoints --follow` reads it.
      const client = new ApiClient({ url: api.url });
      void (async () => {
        // Only the stream's `event: endpoints` blocks come out of followEndpoints.
        for await (const table of client.followEndpoints({}, follow.signal)) followed.push(table);
      })();
      fleet = stackFleet(gw.url, { nodes: 4, gpusPerNode: 8, seed: 7 });
      fleet.on((e) => {
        if (e.type === "command" && e.command === "drain")
          drainsReceived.push({ order: ++order, shardId: e.shardId });
      });
      await fleet.start();
      await eventually(
        async () =>
          (await call("GET", "/v1/nodes")).nodes.filter((n: any) => n.liveness === "connected").length === 4,
        { what: "four connected nodes" },
      );

      const bucketEqualsApi = async (what: string) => {
        // Models in name order, whatever order they (re)appeared in: the bucket lists them so too.
        const models = Object.keys((await call("GET", "/v1/endpoints")).endpoints);
        assert.deepEqual(models, [...models].sort(), `/v1/endpoints lists its models in name order ${what}`);
        await eventually(
          async () =>
            JSON.stringify(await bucket.read()) ===
            JSON.stringify((await call("GET", "/v1/endpoints")).endpoints),
          { what: `the bucket equals /v1/endpoints ${what}`, timeoutMs: 10_000 },
        ).catch(async (err) => {
          throw new Error(
            `${(err as Error).message}\nbucket: ${JSON.stringify(await bucket.read())}${await why()}`,
          );
        });
      };
      const allServing = async (what: string) => {
        await eventually(
          async () => {
            const rs = await replicas();
            const t: Table = (await call("GET", "/v1/endpoints")).endpoints;
            return (
              rs.length === 4 &&
              rs.every((r) => r.phase === "running") &&
              ids(t[SMALL]).length === 3 &&
              ids(t[BIG]).length === 1
            );
          },
          { what, timeoutMs: 40_000 },
        ).catch(async (err) => {
          throw new Error(`${(err as Error).message}${await why()}`);
        });
      };

      // 1. Placement: three one-node replicas and one across two nodes.
      await call("PUT", "/v1/catalog", CATALOG);
      await allServing("four replicas running and routed to");
      await bucketEqualsApi("after placement");
      assert.deepEqual(
        kv.filter((c) => c.model === "retired-model").map((c) => c.replicas),
        [["r-old"], []],
        "the stale key was deleted when the leader took over",
      );
      const big = (await replicas()).find((r) => r.model === BIG);
      assert.equal(big.shards.length, 2);
      const one: any = await call("GET", `/v1/endpoints?model=${BIG}`);
      assert.deepEqual(one.endpoints, [
        {
          replicaId: big.replicaId,
          url: big.shards.find((s: any) => s.rank === 0).endpoint,
          nodeId: big.nodeIds[0],
        },
      ]);
      assert.match(one.endpoints[0].url, /^http:\/\/node-\d:80\d\d$/);

      // The leader stops (a pass in flight finishes); the standby takes over and syncs the bucket.
      const [leader, next] = (await rec.isLeader()) ? [rec, standby] : [standby, rec];
      leader.signal("SIGTERM");
      await leader.exited;
      await eventually(() => next.isLeader(), { what: `${next.id} to lead`, timeoutMs: 20_000 });

      // 2. Drain the node holding rank 0 of the two-node replica.
      const drainedNode = big.nodeIds[0] as string;
      const before = await replicas();
      const moving = before.filter((r) => r.nodeIds.includes(drainedNode)).map((r) => r.replicaId as string);
      await call("POST", `/v1/nodes/${drainedNode}/drain`, { reason: "kernel upgrade" });
      await eventually(
        async () => {
          const rs = await replicas();
          return (
            rs.every((r) => !moving.includes(r.replicaId)) &&
            fleet!.node(drainedNode)!.shardList().length === 0
          );
        },
        { what: `${drainedNode}'s replicas moved`, timeoutMs: 40_000 },
      ).catch(async (err) => {
        throw new Error(`${(err as Error).message}${await why()}`);
      });
      await allServing("four replicas again after the drain");
      await bucketEqualsApi("after the drain");

      // 3. A node comes back empty: its replicas' shards are gone; they fail and are replaced.
      const victim = (await replicas()).find((r) => r.model === SMALL && !r.nodeIds.includes(drainedNode));
      const victimNode = victim.nodeIds[0] as string;
      fleet.node(victimNode)!.restart({ keepShards: false });
      await eventually(
        async () =>
          !(await replicas()).some((r) => r.replicaId === victim.replicaId && r.phase === "running"),
        { what: `${victim.replicaId} no longer running`, timeoutMs: 20_000 },
      );
      await allServing("four replicas again after the empty restart");
      await bucketEqualsApi("after the empty restart");

      // Read back: the log's tables, the bucket's history and the agents' drains.
      const records = await readAll(log);
      const passes = passesOf(records);
      const logged = new Map<string, string[][]>();
      for (const { p } of passes)
        for (const d of p.decisions)
          if (d.kind.case === "endpointsChanged")
            logged.set(d.kind.value.model, [
              ...(logged.get(d.kind.value.model) ?? []),
              ids(d.kind.value.endpoints),
            ]);
      assert.ok((logged.get(SMALL)?.length ?? 0) >= 3, "the small model's table changed several times");

      // Every table a pass recorded reached the bucket, in the same order.
      const collapse = (xs: string[][]) =>
        xs.filter((x, i) => i === 0 || JSON.stringify(x) !== JSON.stringify(xs[i - 1]));
      for (const model of [SMALL, BIG]) {
        assert.deepEqual(
          collapse(kv.filter((c) => c.model === model).map((c) => c.replicas)),
          collapse(logged.get(model) ?? []),
          `the bucket's history of ${model} is the log's`,
        );
      }

      // Listed only once every shard runs: the two-node replica's listing follows both shards' RUNNING.
      const firstListed = passes.find(({ p }) =>
        p.decisions.some(
          (d) => d.kind.case === "endpointsChanged" && ids(d.kind.value.endpoints).includes(big.replicaId),
        ),
      );
      assert.ok(firstListed, `${big.replicaId} was listed`);
      for (const s of big.shards) {
        const running = records.find(
          (r) =>
            r.event.body.case === "shardStatus" &&
            r.event.body.value.status?.shardId === s.shardId &&
            r.event.body.value.status?.state === State.RUNNING,
        );
        assert.ok(
          running && running.seq < firstListed.r.seq,
          `${s.shardId} ran before ${big.replicaId} was listed`,
        );
      }
      const violations = checkLog(records).violations.filter((v) => v.rule === "endpoint-not-ready");
      assert.deepEqual(violations, []);

      // A draining replica leaves the bucket before its agent receives the DrainShard.
      const drained = passes.flatMap(({ r, p }) =>
        p.decisions.flatMap((d) =>
          d.kind.case === "replicaDrainStarted"
            ? [{ seq: r.seq, timeMs: r.timeMs, id: d.kind.value.replicaId, p }]
            : [],
        ),
      );
      assert.ok(drained.length >= moving.length, "every moved replica drained");
      let checked = 0;
      for (const d of drained) {
        const shards = d.p.commands.flatMap((c) =>
          c.action.case === "drain" && c.replicaId === d.id ? [c.action.value.shardId] : [],
        );
        const received = drainsReceived.filter((x) => shards.includes(x.shardId));
        if (received.length === 0) continue;
        const model = before.find((r) => r.replicaId === d.id)?.model ?? SMALL;
        const listedAt = kv.findIndex((c) => c.model === model && c.replicas.includes(d.id));
        assert.ok(listedAt >= 0, `${d.id} was in the bucket`);
        const removal = kv.find((c, i) => i > listedAt && c.model === model && !c.replicas.includes(d.id));
        assert.ok(removal, `${d.id} left the bucket`);
        assert.ok(
          removal.createdMs <= d.timeMs,
          `${d.id} left the bucket (${removal.createdMs}) no later than the pass with its drain was stored (${d.timeMs})`,
        );
        for (const x of received)
          assert.ok(
            removal.order < x.order,
            `${d.id} left the bucket before ${x.shardId}'s agent got the drain`,
          );
        checked++;
      }
      assert.ok(
        checked >= moving.length,
        `the drains of ${checked} replica(s) reached agents and were checked`,
      );

      // The follow mode saw the same tables, the last one being the table now.
      await eventually(
        async () => JSON.stringify(followed.at(-1)?.endpoints) === JSON.stringify(await bucket.read()),
        { what: "the followed table to catch up" },
      );
      assert.ok(followed.length >= 3, "the follow stream sent every change");
      assert.ok(followed.every((t) => typeof t.seq === "number" && "endpoints" in t));

      // A model nobody knows is a 404 with a message.
      const unknown = await fetch(`${api.url}/v1/endpoints?model=nope`);
      assert.equal(unknown.status, 404);
      assert.match(((await unknown.json()) as any).error.message, /model nope not found/);
    } finally {
      follow.abort();
      stopWatch?.();
      await fleet?.stop();
      await stack?.close();
      await nc.close();
    }
  });
});
