import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { type ReplicaState, routingTable, type ShardState } from "../../src/projections/index.js";
import { touchingReplica } from "../../src/reconciler/explain/index.js";
import { verifyKeptRoutes } from "../../src/reconciler/index.js";
import { Fleet, kinds, llama8b, llama70b, llama405b, ofKind } from "../support/fleet.js";

const url = (nodeId: string, shardId: string) => `http://${nodeId}:8000/${shardId}`;

function withEndpoints(nodes: string[]): Fleet {
  const f = new Fleet();
  f.endpointOf = url;
  for (const n of nodes) f.connect(n);
  return f;
}

const tables = (decisions: ReturnType<Fleet["step"]>["decisions"]) =>
  ofKind(decisions, "endpointsChanged").map((v) => ({
    model: v.model,
    replicas: v.endpoints.map((e) => e.replicaId),
  }));

describe("decide: the routing table", () => {
  it("lists a replica once all its shards run, at rank 0's endpoint", () => {
    const f = withEndpoints(["gpu-a1", "gpu-a2"]);
    f.catalog(llama405b(1));
    const passes = f.settle();
    assert.deepEqual(tables(passes.flatMap((p) => p.decisions)), [], "nothing is ready yet");
    const starts = passes.flatMap((p) => p.commands).filter((c) => c.action.case === "start");
    assert.equal(starts.length, 2);
    const byRank = starts
      .map((c) => {
        if (c.action.case !== "start") throw new Error("not a start");
        return { node: c.nodeId, ...c.action.value };
      })
      .sort((a, b) => a.rank - b.rank);
    const rank0 = byRank[0]!;
    const rank1 = byRank[1]!;
    assert.deepEqual([rank0.rank, rank1.rank], [0, 1]);

    // Given rank 1 runs and rank 0 still loads, when a pass runs, then the table stays empty.
    f.shard(rank1.node, rank1.replicaId, rank1.shardId, ShardStatus_State.RUNNING, "", "http://rank1");
    f.shard(rank0.node, rank0.replicaId, rank0.shardId, ShardStatus_State.STARTING);
    assert.deepEqual(tables(f.step().decisions), []);
    assert.deepEqual(f.state.replicas.endpoints, {});

    // When rank 0 runs too, the replica is listed, at rank 0's URL.
    f.shard(rank0.node, rank0.replicaId, rank0.shardId, ShardStatus_State.RUNNING, "", "http://rank0");
    const ready = f.step();
    assert.deepEqual(kinds(ready.decisions), ["endpointsChanged"]);
    assert.deepEqual(f.state.replicas.endpoints, {
      "llama-3.1-405b": [{ replicaId: rank0.replicaId, url: "http://rank0", nodeId: rank0.node }],
    });
    assert.match(ready.decisions[0]!.explanation, /ready at http:\/\/rank0; 1 endpoint\(s\)/);
    assert.deepEqual(f.settle(), [], "an unchanged table is not restated");
  });

  it("takes a replica out in the same pass that starts its drain", () => {
    const f = withEndpoints(["gpu-a1", "gpu-a2"]);
    f.catalog(llama70b(3));
    f.run();
    assert.equal(f.state.replicas.endpoints["llama-3.3-70b"]?.length, 3);
    const ids = f.replicasOf("llama-3.3-70b").map((r) => r.replicaId);

    f.catalog(llama70b(1));
    const out = f.step();
    assert.deepEqual(kinds(out.decisions), [
      "replicaDrainStarted",
      "replicaDrainStarted",
      "endpointsChanged",
    ]);
    assert.deepEqual(tables(out.decisions), [{ model: "llama-3.3-70b", replicas: [ids[0]] }]);
    assert.ok(out.commands.every((c) => c.action.case === "drain"));
  });

  it("is never cut by the pass limit", () => {
    const f = withEndpoints(["gpu-a1", "gpu-a2"]);
    f.catalog(llama70b(3));
    f.run();
    f.config = { ...f.config, maxDecisionsPerPass: 1 };
    f.catalog(llama70b(1));
    const out = f.step();
    assert.equal(out.truncated, true);
    assert.deepEqual(kinds(out.decisions), ["replicaDrainStarted", "endpointsChanged"]);
    const drained = ofKind(out.decisions, "replicaDrainStarted")[0]!.replicaId;
    assert.ok(!tables(out.decisions)[0]!.replicas.includes(drained), `${drained} left the table`);
    assert.equal(tables(out.decisions)[0]!.replicas.length, 2, "the one not drained yet stays");
  });

  it("drops a replica whose shard failed, and lists its replacement once it runs", () => {
    const f = withEndpoints(["gpu-a1", "gpu-a2"]);
    f.catalog(llama70b(1));
    f.run();
    const [r] = f.replicasOf("llama-3.3-70b");
    const shard = r!.shards[0]!;
    f.shard(shard.nodeId, r!.replicaId, shard.shardId, ShardStatus_State.FAILED, "CUDA error");
    const out = f.step();
    assert.deepEqual(tables(out.decisions), [{ model: "llama-3.3-70b", replicas: [] }]);
    assert.deepEqual(f.state.replicas.endpoints, {}, "an empty list leaves no key");
    f.obey(out);
    // The replacement waits out the crash backoff, then runs.
    f.advance(10 * 60_000);
    f.run();
    assert.equal(f.state.replicas.endpoints["llama-3.3-70b"]?.length, 1);
  });

  it("lists adopted shards at the endpoint their node registered", () => {
    const f = new Fleet();
    f.catalog(llama70b(1));
    f.connect("gpu-a1", {
      running: [
        {
          shard: "old-s0",
          replica: "llama-3.3-70b-old",
          model: "llama-3.3-70b",
          profile: "tp4",
          gpus: [0, 1, 2, 3],
          endpoint: "http://gpu-a1:8000",
        },
      ],
    });
    const out = f.step();
    assert.ok(kinds(out.decisions).includes("shardsAdopted"));
    assert.deepEqual(f.state.replicas.endpoints, {
      "llama-3.3-70b": [{ replicaId: "llama-3.3-70b-old", url: "http://gpu-a1:8000", nodeId: "gpu-a1" }],
    });
  });

  it("lists nothing for shards that report no endpoint (agents built before it)", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.catalog(llama70b(1));
    f.run();
    assert.equal(f.replicasOf("llama-3.3-70b")[0]?.phase, "running");
    assert.deepEqual(f.state.replicas.endpoints, {});
  });

  it("explain names the passes where a replica entered and left the table, not every restatement", () => {
    const f = withEndpoints(["gpu-a1", "gpu-a2"]);
    f.catalog(llama70b(2));
    f.run();
    const [first, second] = f.replicasOf("llama-3.3-70b").map((r) => r.replicaId);
    f.catalog(llama70b(1));
    f.run();
    const passes = f.events.flatMap((e) =>
      e.event.body.case === "reconcilePass"
        ? [{ seq: e.seq, timeMs: e.timeMs, pass: e.event.body.value }]
        : [],
    );
    const routing = (id: string) =>
      touchingReplica(passes, id)
        .filter((t) => t.kind === "endpointsChanged")
        .map((t) => t.text);
    // The newest replica is drained: it entered once and left once.
    assert.equal(routing(second!).length, 2);
    assert.match(routing(second!)[1]!, new RegExp(`${second} no longer ready`));
    // The other one entered once; the table restated without the drained one does not touch it.
    assert.equal(routing(first!).length, 1);
  });

  it("publishes, pass after pass, exactly the table routingTable defines, though it rebuilds only the models whose replicas changed", () => {
    const f = withEndpoints(["gpu-a1", "gpu-a2", "gpu-a3", "gpu-b1"]);
    const published = (when: string) =>
      assert.deepEqual(f.state.replicas.endpoints, routingTable(f.state), `the published table ${when}`);
    f.catalog(llama70b(3), llama8b(4));
    f.run();
    published("once the fleet runs");
    const running = () => f.state.replicas.replicas.values().filter((r) => r.phase === "running");
    // A ready replica's engine moves to another URL: its groups do not change, only the record.
    const moved = running()[0]!;
    const head = moved.shards[0]!;
    f.shard(head.nodeId, moved.replicaId, head.shardId, ShardStatus_State.RUNNING, "", "http://moved:9000");
    f.step();
    published("after an endpoint moved");
    assert.ok(
      Object.values(f.state.replicas.endpoints)
        .flat()
        .some((e) => e.url === "http://moved:9000"),
      "the moved endpoint is listed",
    );
    // A shard fails, its replica is placed again and runs.
    const failed = running()[1]!;
    const s = failed.shards[0]!;
    f.shard(s.nodeId, failed.replicaId, s.shardId, ShardStatus_State.FAILED, "engine exited");
    f.step();
    published("after a shard failed");
    f.advance(f.config.crashBackoffMaxMs);
    f.run();
    published("once the failed replica runs again");
    // Scaled down, a node drained.
    f.catalog(llama70b(2), llama8b(2));
    f.drain("gpu-a1");
    for (let i = 0; i < 20; i++) {
      const out = f.step();
      published(`in pass ${i} of the scale-down and drain`);
      if (out.decisions.length === 0 && out.commands.length === 0) break;
      f.obey(out);
    }
  });

  it("keeps the routing table across passes exactly, and its verifier catches a change made around the replica table", () => {
    const f = withEndpoints(["gpu-a1", "gpu-a2"]);
    f.catalog(llama8b(4));
    f.run(); // every pass checks the kept table against the projection's routingTable (test/support/fleet.ts)
    const table = f.state.replicas.endpoints["llama-3.1-8b"] ?? [];
    assert.equal(table.length, 4);
    const replica = f.state.replicas.replicas.get(table[1]!.replicaId) as ReplicaState;
    (replica.shards[0] as ShardState).endpoint = "http://around-the-table";
    assert.throws(() => verifyKeptRoutes(f.state), /the kept routing table is stale/);
  });
});
