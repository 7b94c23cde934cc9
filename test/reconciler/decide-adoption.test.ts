import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { actions, Fleet, kinds, llama8b, llama70b, model, ofKind } from "../support/fleet.js";

const r70 = (replica: string, shard: string, gpus = [0, 1, 2, 3]) => ({
  shard,
  replica,
  model: "llama-3.3-70b",
  profile: "tp4",
  gpus,
});

describe("decide: the empty cases", () => {
  it("given no nodes and no catalog, decides nothing", () => {
    const f = new Fleet();
    const out = f.decide();
    assert.deepEqual(out.decisions, []);
    assert.deepEqual(out.commands, []);
    assert.equal(out.truncated, false);
    assert.equal(out.nextDeadlineMs, null);
  });

  it("given a catalog with no models and a connected node running nothing, only adopts (an empty list)", () => {
    const f = Fleet.of([], ["gpu-a1"]);
    const out = f.step();
    assert.deepEqual(kinds(out.decisions), ["shardsAdopted"]);
    assert.deepEqual(ofKind(out.decisions, "shardsAdopted")[0]?.shards, []);
    assert.match(out.decisions[0]?.explanation ?? "", /running nothing/);
    assert.notEqual(f.state.inventory.nodes.get("gpu-a1")?.session?.adoptionSeq, 0);
    assert.deepEqual(f.settle(), []);
  });

  it("given a model with 0 replicas, creates nothing", () => {
    const f = Fleet.of([llama70b(0)], ["gpu-a1"]);
    f.step();
    assert.deepEqual(f.settle(), []);
    assert.equal(f.state.replicas.replicas.size, 0);
  });

  it("given a catalog but no nodes, creates the replicas and records them pending once", () => {
    const f = new Fleet();
    f.catalog(llama70b(2));
    const out = f.step();
    assert.deepEqual(kinds(out.decisions), [
      "replicaCreated",
      "replicaCreated",
      "replicaPending",
      "replicaPending",
    ]);
    assert.equal(out.decisions[2]?.explanation, "0/0 nodes fit: the fleet has no nodes");
    assert.deepEqual(f.settle(), [], "the same pending reason is not repeated");
  });
});

describe("decide: adoption", () => {
  it("given a node that registers running a shard of a known replica, adopts it as running and restarts nothing", () => {
    const f = Fleet.of([llama70b(1)], ["gpu-a1"]);
    f.obey(f.step()).obey(f.step());
    const [r] = f.replicasOf("llama-3.3-70b");
    assert.ok(r);
    const shard = r.shards[0];
    assert.ok(shard);
    assert.equal(r.phase, "running");
    // The agent restarts; its engine keeps running.
    f.disconnect("gpu-a1").advance(5_000);
    f.connect("gpu-a1", { running: [r70(r.replicaId, shard.shardId, shard.gpuIndices)] });
    const out = f.step();
    assert.deepEqual(kinds(out.decisions), ["shardsAdopted"]);
    assert.deepEqual(out.commands, []);
    assert.equal(f.state.replicas.replicas.get(r.replicaId)?.phase, "running");
    assert.equal(f.state.replicas.replicas.get(r.replicaId)?.shards[0]?.adopted, true);
    assert.deepEqual(f.settle(), []);
  });

  it("given an unknown replica id of a catalog model that still needs replicas, adopts it and creates one replica fewer", () => {
    const f = new Fleet();
    f.catalog(llama70b(2));
    f.connect("gpu-a1", { running: [r70("old-r7", "old-r7-s0")] });
    const out = f.step();
    assert.deepEqual(kinds(out.decisions), ["shardsAdopted"]);
    assert.equal(ofKind(out.decisions, "shardsAdopted")[0]?.shards[0]?.replicaId, "old-r7");
    const next = f.step();
    assert.deepEqual(kinds(next.decisions), ["replicaCreated", "replicaPlaced"]);
    assert.deepEqual(ofKind(next.decisions, "replicaPlaced")[0]?.shards[0]?.gpuIndices, [4, 5, 6, 7]);
  });

  it("given shards nothing claims, stops them: a model not in the catalog, a profile it lacks, a model already full", () => {
    const f = new Fleet();
    f.catalog(llama70b(1));
    f.connect("gpu-a1", {
      running: [
        r70("x1", "x1-s0", [0, 1, 2, 3]),
        r70("x2", "x2-s0", [4, 5, 6, 7]),
        { shard: "m-s0", replica: "m", model: "mistral-small", profile: "tp1", gpus: [0] },
        { shard: "p-s0", replica: "p", model: "llama-3.3-70b", profile: "tp8", gpus: [0] },
      ],
    });
    const out = f.step();
    assert.deepEqual(kinds(out.decisions), [
      "shardsAdopted",
      "shardUnclaimed",
      "shardUnclaimed",
      "shardUnclaimed",
    ]);
    const reasons = ofKind(out.decisions, "shardUnclaimed").map((u) => `${u.shardId}: ${u.reason}`);
    assert.deepEqual(reasons, [
      "x2-s0: llama-3.3-70b already has 1/1 replicas",
      "m-s0: model mistral-small is not in the catalog",
      "p-s0: llama-3.3-70b has no profile tp8",
    ]);
    assert.deepEqual(actions(out.commands), ["stop:gpu-a1", "stop:gpu-a1", "stop:gpu-a1"]);
    assert.deepEqual(f.settle(), []);
  });

  it("given a shard on a GPU the node does not list, never adopts it: it is stopped as unclaimed", () => {
    const f = new Fleet();
    f.catalog(llama70b(1));
    // Seven GPUs listed; the engine on 4-7 kept running after GPU 7 fell off the bus.
    f.connect("gpu-a1", { gpus: 7, running: [r70("x1", "x1-s0", [4, 5, 6, 7])] });
    const out = f.step();
    assert.deepEqual(kinds(out.decisions), ["shardsAdopted", "shardUnclaimed"]);
    assert.deepEqual(ofKind(out.decisions, "shardsAdopted")[0]?.shards, []);
    assert.equal(ofKind(out.decisions, "shardUnclaimed")[0]?.reason, "GPU 7 is not on the node");
    assert.deepEqual(actions(out.commands), ["stop:gpu-a1"]);
  });

  it("given a node that re-registers running nothing, its earlier shards are gone and their replicas placed again", () => {
    const f = Fleet.of([llama70b(1)], ["gpu-a1", "gpu-b1"]);
    f.run();
    const [r] = f.replicasOf("llama-3.3-70b");
    const was = r?.shards[0]?.nodeId as string;
    f.disconnect(was).advance(1_000);
    f.connect(was, { running: [] });
    const out = f.step();
    assert.deepEqual(kinds(out.decisions), ["shardsAdopted", "replicaFailed"]);
    assert.equal(ofKind(out.decisions, "replicaFailed")[0]?.error, "node re-registered without it");
    const again = f.step();
    assert.deepEqual(kinds(again.decisions), ["replicaPlaced"]);
  });

  it("waits for every connected node's adoption before placing anything", () => {
    const f = Fleet.of([llama8b(1)], ["gpu-a1"]);
    const first = f.step();
    assert.deepEqual(
      kinds(first.decisions),
      ["shardsAdopted"],
      "no replica created or placed in an adopting pass",
    );
    const second = f.step();
    assert.deepEqual(kinds(second.decisions), ["replicaCreated", "replicaPlaced"]);
  });

  it("stops a returning node's shard whose replica was re-placed while it was away (duplicate)", () => {
    const f = Fleet.of([llama70b(1)], ["gpu-a1", "gpu-b1"]);
    f.run();
    const [r] = f.replicasOf("llama-3.3-70b");
    const shard = r?.shards[0];
    assert.ok(r && shard);
    f.disconnect(shard.nodeId);
    f.advance(f.config.lostAfterMs);
    const lost = f.step();
    assert.deepEqual(kinds(lost.decisions), ["nodeLiveness", "replicaFailed", "replicaPlaced"]);
    f.obey(lost);
    const moved = f.state.replicas.replicas.get(r.replicaId)?.shards[0]?.nodeId;
    assert.notEqual(moved, shard.nodeId);
    f.connect(shard.nodeId, { running: [r70(r.replicaId, shard.shardId, shard.gpuIndices)] });
    const back = f.step();
    assert.deepEqual(kinds(back.decisions), ["shardsAdopted", "duplicateStopped"]);
    assert.deepEqual(actions(back.commands), [`stop:${shard.nodeId}`]);
    assert.deepEqual(f.settle(), []);
  });

  it("re-adopts a returning node's shard when its replica is still waiting to be placed", () => {
    const f = new Fleet();
    f.catalog(model("llama-3.3-70b", 1, { name: "tp4", gpus: 4, memGb: 72, labels: { pool: "a" } }));
    f.connect("gpu-a1", { labels: { pool: "a" } });
    f.run();
    const [r] = f.replicasOf("llama-3.3-70b");
    const shard = r?.shards[0];
    assert.ok(r && shard);
    f.disconnect("gpu-a1").advance(f.config.lostAfterMs);
    f.step();
    assert.equal(f.state.replicas.replicas.get(r.replicaId)?.phase, "pending");
    f.connect("gpu-a1", {
      labels: { pool: "a" },
      running: [r70(r.replicaId, shard.shardId, shard.gpuIndices)],
    });
    const back = f.step();
    assert.deepEqual(kinds(back.decisions), ["shardsAdopted"]);
    assert.equal(f.state.replicas.replicas.get(r.replicaId)?.phase, "running");
    assert.deepEqual(f.settle(), []);
  });
});
