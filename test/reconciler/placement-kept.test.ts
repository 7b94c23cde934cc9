import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { cloneFleet } from "../../src/projections/index.js";
import { type DecideOutput, decide } from "../../src/reconciler/index.js";
import { Fleet, kinds, llama8b, llama70b, model, ofKind } from "../support/fleet.js";

/**
 * Placement keeps its node views and fit indexes across passes
 * (placement/kept-view.ts). A copy of the state has containers of its own,
 * so deciding on it builds every view afresh: the two must decide the same.
 */
function decideBoth(f: Fleet): DecideOutput {
  const input = { state: f.state, config: f.config, nowMs: f.nowMs, liveGateways: f.live };
  const kept = decide(input);
  const fresh = decide({ ...input, state: cloneFleet(f.state) });
  assert.deepEqual(kept, fresh, "the kept placement view decided otherwise than a fresh one");
  return kept;
}

/** Passes (each checked against a fresh view), folded and obeyed, until one decides nothing. */
function settleBoth(f: Fleet): DecideOutput[] {
  const outs: DecideOutput[] = [];
  for (let i = 0; i < 20; i++) {
    const out = decideBoth(f);
    if (out.decisions.length === 0 && out.commands.length === 0) return outs;
    outs.push(out);
    f.fold(out).obey(out);
  }
  throw new Error("no convergence");
}

function placedOn(out: DecideOutput): string[] {
  return ofKind(out.decisions, "replicaPlaced").map(
    (p) => `${p.shards[0]?.nodeId} [${p.shards[0]?.gpuIndices.join(",")}]`,
  );
}

describe("placement: the view kept across passes", () => {
  it("a pass's placements reach the next pass only once folded", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.settle();
    f.catalog(llama70b(2));
    const first = decideBoth(f);
    const again = decideBoth(f);
    assert.deepEqual(placedOn(first), ["gpu-a1 [0,1,2,3]", "gpu-a1 [4,5,6,7]"]);
    assert.deepEqual(again, first, "the GPUs the unfolded pass took are free again");
    f.fold(first).obey(first);
    f.catalog(llama70b(3));
    const more = f.step();
    assert.deepEqual(kinds(more.decisions), ["replicaCreated", "replicaPending"]);
    assert.match(more.decisions[1]?.explanation ?? "", /^0\/1 nodes fit: 1 too few free GPUs/);
  });

  it("pass after pass, through failures, faults, cordons, a changed profile and new nodes, decides what a fresh view would", () => {
    const f = new Fleet();
    for (const n of ["gpu-a1", "gpu-a2", "gpu-b1"]) f.connect(n);
    settleBoth(f);
    f.catalog(llama8b(3), llama70b(2));
    settleBoth(f);
    const running = () => f.state.replicas.replicas.values().filter((r) => r.phase === "running");
    assert.equal(running().length, 5);

    // A replica fails: its GPUs are free for the next pass, after its backoff.
    const victim = running().find((r) => r.model === "llama-3.3-70b");
    const shard = victim?.shards[0];
    assert.ok(victim && shard);
    f.shard(shard.nodeId, victim.replicaId, shard.shardId, ShardStatus_State.FAILED, "engine exited");
    settleBoth(f);
    f.advance(f.config.crashBackoffMaxMs);
    settleBoth(f);
    assert.equal(running().length, 5);

    // A GPU fault, a cordoned GPU, a cordoned node: fewer places to put replicas.
    const busy = running()[0]?.shards[0];
    assert.ok(busy);
    f.gpuProblem(busy.nodeId, busy.gpuIndices[0] as number);
    settleBoth(f);
    f.cordonGpu("gpu-b1", 7);
    f.cordon("gpu-a2");
    f.catalog(llama8b(6), llama70b(2));
    settleBoth(f);

    // The same profile name with other needs: the fits kept for the old spec do not apply.
    f.uncordon("gpu-a2");
    f.catalog(llama8b(6), model("llama-3.3-70b", 3, { name: "tp4", gpus: 2, memGb: 40 }));
    settleBoth(f);

    // A node leaves, new ones register (the set of nodes changes), one drains.
    f.disconnect("gpu-b1").advance(f.config.suspectAfterMs);
    settleBoth(f);
    f.connect("gpu-c1");
    f.connect("gpu-c2");
    settleBoth(f);
    f.drain("gpu-a1");
    settleBoth(f);
    f.catalog(llama8b(2));
    settleBoth(f);
    assert.ok(running().every((r) => r.shards.every((s) => s.nodeId !== "gpu-a1")));
  });
});
