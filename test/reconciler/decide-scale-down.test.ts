/**
 * Scale-down takes what serves nothing first: a model with a replica that
 * is not ready, scaled down by one, loses that one and keeps every ready
 * replica (found by `llmgw simulate --seed 18`: chat-large 5 → 4 drained a
 * ready replica while another was loading, leaving 3 ready of 4).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { isReady } from "../../src/projections/index.js";
import { Fleet, kinds, llama8b, ofKind } from "../support/fleet.js";

const M8 = "llama-3.1-8b";

/** Three llama-3.1-8b replicas running on one node, oldest first. */
function threeRunning(): { f: Fleet; ids: string[] } {
  const f = new Fleet();
  f.connect("gpu-a1", { gpus: 8 });
  f.catalog(llama8b(3));
  f.run();
  const rs = f.replicasOf(M8).sort((a, b) => a.createdSeq - b.createdSeq);
  assert.equal(rs.filter(isReady).length, 3);
  return { f, ids: rs.map((r) => r.replicaId) };
}

describe("decide: scale-down", () => {
  it("with every replica ready, drains the newest", () => {
    const { f, ids } = threeRunning();
    f.catalog(llama8b(2));
    const out = f.step();
    assert.deepEqual(
      ofKind(out.decisions, "replicaDrainStarted").map((d) => d.replicaId),
      [ids[2]],
    );
  });

  it("drains a replica that is not ready before a ready one, though it is older", () => {
    const { f, ids } = threeRunning();
    const oldest = f.state.replicas.replicas.get(ids[0] ?? "");
    const shard = oldest?.shards[0];
    assert.ok(oldest && shard);
    // The oldest replica's engine restarts: starting again, not ready.
    f.shard("gpu-a1", oldest.replicaId, shard.shardId, ShardStatus_State.STARTING);
    assert.equal(isReady(f.state.replicas.replicas.get(oldest.replicaId) ?? oldest), false);
    f.catalog(llama8b(2));
    const out = f.step();
    assert.deepEqual(
      ofKind(out.decisions, "replicaDrainStarted").map((d) => d.replicaId),
      [oldest.replicaId],
      `decided ${kinds(out.decisions).join(", ")}`,
    );
    const ready = f
      .replicasOf(M8)
      .filter(isReady)
      .map((r) => r.replicaId);
    assert.deepEqual(ready.sort(), [ids[1], ids[2]].sort(), "both ready replicas still serve");
  });
});
