import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { actions, Fleet, kinds, llama8b, llama70b, ofKind } from "../support/fleet.js";

function running(nodes: string[], ...models: Parameters<Fleet["catalog"]>) {
  const f = new Fleet();
  for (const n of nodes) f.connect(n);
  f.catalog(...models);
  f.run();
  return f;
}

describe("decide: scale", () => {
  it("scales down newest first: drains, then removes once the shards stopped", () => {
    const f = running(["gpu-a1", "gpu-a2"], llama70b(3));
    const ids = f.replicasOf("llama-3.3-70b").map((r) => r.replicaId);
    assert.equal(ids.length, 3);
    f.catalog(llama70b(1));
    const out = f.step();
    assert.deepEqual(kinds(out.decisions), ["replicaDrainStarted", "replicaDrainStarted"]);
    assert.deepEqual(
      ofKind(out.decisions, "replicaDrainStarted").map((d) => d.replicaId),
      [ids[2], ids[1]],
    );
    assert.deepEqual(
      out.commands.map((c) => [c.action.case, c.deadlineUnixMs]),
      [
        ["drain", BigInt(f.nowMs + f.config.commandTimeoutMs)],
        ["drain", BigInt(f.nowMs + f.config.commandTimeoutMs)],
      ],
    );
    assert.deepEqual(f.settle(), [], "nothing new while the shards drain");
    f.obey(out);
    const removed = f.step();
    assert.deepEqual(kinds(removed.decisions), ["replicaRemoved", "replicaRemoved"]);
    assert.deepEqual(Object.keys(f.state.replicas.replicas), [ids[0]]);
    assert.deepEqual(f.settle(), []);
  });

  it("stops what still runs at the drain deadline, then removes the replica", () => {
    const f = running(["gpu-a1"], llama70b(1));
    f.catalog(llama70b(0));
    const out = f.step();
    assert.deepEqual(kinds(out.decisions), ["replicaDrainStarted"]);
    // The drain's result is due first (commandTimeoutMs), then the drain's end.
    assert.equal(f.decide().nextDeadlineMs, f.nowMs + f.config.commandTimeoutMs);
    f.advance(f.config.drainDeadlineMs);
    const late = f.step();
    assert.ok(kinds(late.decisions).includes("replicaRemoved"));
    assert.ok(actions(late.commands).includes("stop:gpu-a1"));
    assert.deepEqual(f.state.replicas.replicas, {});
  });

  it("drains every replica of a model removed from the catalog; one never placed is removed at once", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.catalog(llama70b(3));
    f.run();
    assert.equal(f.replicasOf("llama-3.3-70b").filter((r) => r.phase === "pending").length, 1);
    f.catalog(llama8b(0));
    const out = f.step();
    assert.deepEqual(kinds(out.decisions).sort(), [
      "replicaDrainStarted",
      "replicaDrainStarted",
      "replicaRemoved",
    ]);
  });
});

describe("decide: node drain and cordon", () => {
  it("drains a node make-before-break: replacement placed, runs, then the old one drains and goes", () => {
    const f = running(["gpu-a1", "gpu-b1"], llama70b(1));
    const [old] = f.replicasOf("llama-3.3-70b");
    const from = old?.shards[0]?.nodeId as string;
    f.drain(from);
    const out = f.step();
    assert.deepEqual(kinds(out.decisions), ["replicaCreated", "replicaPlaced"]);
    const created = ofKind(out.decisions, "replicaCreated")[0];
    assert.equal(created?.replaces, old?.replicaId);
    assert.notEqual(ofKind(out.decisions, "replicaPlaced")[0]?.shards[0]?.nodeId, from);
    assert.deepEqual(f.settle(), [], "the old replica keeps serving until its replacement runs");
    f.obey(out);
    const swap = f.step();
    assert.deepEqual(kinds(swap.decisions), ["replicaDrainStarted"]);
    assert.equal(ofKind(swap.decisions, "replicaDrainStarted")[0]?.replacementId, created?.replicaId);
    f.obey(swap);
    assert.deepEqual(kinds(f.step().decisions), ["replicaRemoved"]);
    assert.deepEqual(
      f.replicasOf("llama-3.3-70b").map((r) => r.replicaId),
      [created?.replicaId],
    );
    assert.deepEqual(f.settle(), []);
  });

  it("cordon: nothing new lands and nothing moves; uncordon: placement again", () => {
    const f = running(["gpu-a1"], llama70b(1));
    f.cordon("gpu-a1");
    f.catalog(llama70b(3));
    const out = f.step();
    assert.deepEqual(kinds(out.decisions), [
      "replicaCreated",
      "replicaCreated",
      "replicaPending",
      "replicaPending",
    ]);
    assert.equal(out.decisions[2]?.explanation, "0/1 nodes fit: 1 cordoned");
    assert.equal(f.replicasOf("llama-3.3-70b").filter((r) => r.phase === "running").length, 1);
    f.uncordon("gpu-a1");
    assert.deepEqual(kinds(f.step().decisions), ["replicaPlaced", "replicaPending"]);
  });
});

describe("decide: commands", () => {
  it("re-issues a command past its deadline with the same id, attempt+1 and capped exponential backoff", () => {
    const f = new Fleet({ retryBaseMs: 5_000, retryMaxMs: 8_000 });
    f.connect("gpu-a1");
    f.catalog(llama70b(1));
    f.settle();
    const [cmd] = Object.values(f.state.replicas.commands);
    assert.ok(cmd);
    assert.equal(f.decide().nextDeadlineMs, cmd.deadlineMs);
    f.advance(f.config.commandTimeoutMs);
    const waits: number[] = [];
    for (let attempt = 2; attempt <= 4; attempt++) {
      const out = f.step();
      assert.deepEqual(kinds(out.decisions), ["commandReissued"]);
      const c = out.commands[0];
      assert.equal(c?.commandId, cmd.commandId);
      assert.equal(c?.attempt, attempt);
      assert.equal(c?.action.case, "start");
      waits.push(Number(c?.deadlineUnixMs) - f.nowMs);
      f.advance(waits.at(-1) as number);
    }
    assert.deepEqual(waits, [5_000, 8_000, 8_000]);
  });

  it("does not re-issue a command whose session is gone", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.catalog(llama70b(1));
    f.settle();
    f.disconnect("gpu-a1").advance(f.config.commandTimeoutMs);
    assert.ok(!kinds(f.step().decisions).includes("commandReissued"));
  });

  it("stops re-issuing once the shard reports it started", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.catalog(llama70b(1));
    f.settle();
    const [r] = f.replicasOf("llama-3.3-70b");
    f.shard("gpu-a1", r?.replicaId as string, r?.shards[0]?.shardId as string, ShardStatus_State.STARTING);
    f.advance(f.config.commandTimeoutMs);
    assert.deepEqual(f.settle(), []);
  });
});

describe("decide: failures", () => {
  it("a failed shard fails its replica, which backs off before it is placed again; crash loops back off longer", () => {
    const f = new Fleet({ crashBackoffBaseMs: 10_000, crashBackoffMaxMs: 15_000, cooldownFailures: 9 });
    f.connect("gpu-a1");
    f.catalog(llama70b(1));
    f.settle();
    const waits: number[] = [];
    for (let i = 1; i <= 3; i++) {
      const [r] = f.replicasOf("llama-3.3-70b");
      f.shard(
        "gpu-a1",
        r?.replicaId as string,
        r?.shards[0]?.shardId as string,
        ShardStatus_State.FAILED,
        "CUDA out of memory",
      );
      const out = f.step();
      assert.deepEqual(kinds(out.decisions), ["replicaFailed", "shardBackoff"]);
      assert.equal(ofKind(out.decisions, "replicaFailed")[0]?.error, "CUDA out of memory");
      const b = ofKind(out.decisions, "shardBackoff")[0];
      assert.equal(b?.restarts, i);
      waits.push(Number(b?.untilUnixMs) - f.nowMs);
      assert.equal(out.nextDeadlineMs, Number(b?.untilUnixMs));
      assert.deepEqual(f.settle(), [], "nothing placed during the backoff");
      f.advance(waits.at(-1) as number);
      assert.deepEqual(kinds(f.step().decisions), ["replicaPlaced"]);
    }
    assert.deepEqual(waits, [10_000, 15_000, 15_000]);
  });

  it("puts a model/node pair on cooldown after cooldownFailures failures, so placement tries elsewhere", () => {
    const f = new Fleet({ crashBackoffBaseMs: 0, cooldownFailures: 2 });
    f.connect("gpu-a1");
    f.catalog(llama70b(1));
    f.settle();
    f.connect("gpu-b1", { ib: null, labels: {} });
    f.settle();
    for (let i = 1; i <= 2; i++) {
      const [r] = f.replicasOf("llama-3.3-70b");
      const s = r?.shards[0];
      assert.equal(s?.nodeId, "gpu-a1");
      f.shard(
        "gpu-a1",
        r?.replicaId as string,
        s?.shardId as string,
        ShardStatus_State.FAILED,
        "engine crashed",
      );
      const out = f.step();
      if (i < 2) {
        assert.deepEqual(kinds(out.decisions), ["replicaFailed", "shardBackoff", "replicaPlaced"]);
      } else {
        assert.deepEqual(kinds(out.decisions), [
          "replicaFailed",
          "shardBackoff",
          "cooldownStarted",
          "replicaPlaced",
        ]);
        assert.deepEqual(ofKind(out.decisions, "replicaPlaced")[0]?.chosen?.nodeIds, ["gpu-b1"]);
      }
    }
  });
});
