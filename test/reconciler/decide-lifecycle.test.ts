import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { ReplicaFailed_Reason } from "../../src/gen/llmgw/v1/events_pb.js";
import { actions, Fleet, kinds, llama8b, llama70b, model, ofKind } from "../support/fleet.js";

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
    assert.deepEqual(f.state.replicas.replicas.keys(), [ids[0]]);
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
    assert.equal(f.state.replicas.replicas.size, 0);
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
  it("re-sends a start without STARTING with the same id and a doubling wait, then fails the placement", () => {
    const f = new Fleet({
      startTimeoutMs: 5_000,
      retryMaxMs: 30_000,
      startAttempts: 3,
      crashBackoffBaseMs: 0,
    });
    f.connect("gpu-a1");
    f.catalog(llama70b(1));
    f.settle();
    const [cmd] = Object.values(f.state.replicas.commands);
    assert.ok(cmd);
    assert.equal(cmd.deadlineMs, f.nowMs + 5_000, "a start is due STARTING within the start timeout");
    // The agent acknowledges, then never says STARTING: an acknowledgement is not progress.
    f.result("gpu-a1", cmd.commandId);
    assert.equal(f.decide().nextDeadlineMs, f.nowMs + 5_000);
    f.advance(5_000);
    const waits: number[] = [];
    for (let attempt = 2; attempt <= 3; attempt++) {
      const out = f.step();
      assert.deepEqual(kinds(out.decisions), ["commandReissued"]);
      const c = out.commands[0];
      assert.equal(c?.commandId, cmd.commandId);
      assert.equal(c?.attempt, attempt);
      assert.equal(c?.action.case, "start");
      waits.push(Number(c?.deadlineUnixMs) - f.nowMs);
      assert.equal(out.nextDeadlineMs, Number(c?.deadlineUnixMs));
      f.advance(waits.at(-1) as number);
    }
    assert.deepEqual(waits, [10_000, 20_000]);
    const out = f.step();
    assert.deepEqual(kinds(out.decisions).slice(0, 3), ["replicaFailed", "shardBackoff", "cooldownStarted"]);
    const failed = ofKind(out.decisions, "replicaFailed")[0];
    assert.equal(failed?.reason, ReplicaFailed_Reason.START_TIMEOUT);
    assert.match(failed?.error ?? "", /no STARTING from gpu-a1 .* after 3 start\(s\)/);
    assert.deepEqual(
      actions(out.commands).slice(0, 1),
      ["stop:gpu-a1"],
      "a late engine must not hold the GPUs",
    );
    assert.equal(
      f.state.replicas.replicas.get(failed?.replicaId as string)?.lastFailure?.reason,
      "start-timeout",
    );
  });

  it("a refused start fails the replica at once with the agent's error; the replacement goes elsewhere", () => {
    const f = new Fleet({ crashBackoffBaseMs: 0 });
    f.connect("gpu-a1");
    f.catalog(llama70b(1));
    f.settle();
    f.connect("gpu-b1", { ib: null, labels: {} });
    f.settle();
    const [cmd] = Object.values(f.state.replicas.commands);
    f.result("gpu-a1", cmd?.commandId as string, false, "engine image vllm:0.9 not found");
    const out = f.step();
    assert.deepEqual(kinds(out.decisions), [
      "replicaFailed",
      "shardBackoff",
      "cooldownStarted",
      "replicaPlaced",
    ]);
    const failed = ofKind(out.decisions, "replicaFailed")[0];
    assert.equal(failed?.reason, ReplicaFailed_Reason.START_REFUSED);
    assert.equal(failed?.error, "engine image vllm:0.9 not found");
    assert.deepEqual(ofKind(out.decisions, "replicaPlaced")[0]?.chosen?.nodeIds, ["gpu-b1"]);
  });

  it("a shard STARTING past the profile's ready timeout is stopped and its replica failed", () => {
    const f = new Fleet({ crashBackoffBaseMs: 0, readyTimeoutMs: 600_000 });
    f.connect("gpu-a1");
    f.catalog(model("llama-3.3-70b", 1, { name: "tp4", gpus: 4, memGb: 72, readyTimeoutMs: 90_000 }));
    f.settle();
    const [r] = f.replicasOf("llama-3.3-70b");
    const s = r?.shards[0];
    f.result("gpu-a1", s?.startCommandId as string);
    f.shard("gpu-a1", r?.replicaId as string, s?.shardId as string, ShardStatus_State.STARTING);
    assert.equal(f.decide().nextDeadlineMs, f.nowMs + 90_000, "the profile's ready timeout, not the default");
    f.advance(89_999);
    assert.deepEqual(f.settle(), []);
    f.advance(1);
    const out = f.step();
    const failed = ofKind(out.decisions, "replicaFailed")[0];
    assert.equal(failed?.reason, ReplicaFailed_Reason.READY_TIMEOUT);
    assert.match(failed?.error ?? "", /STARTING for 90s, past its ready timeout of 90s/);
    assert.deepEqual(actions(out.commands), ["stop:gpu-a1"]);
  });

  it("a running shard that stops unasked fails its replica, which is replaced", () => {
    const f = new Fleet({ crashBackoffBaseMs: 0 });
    f.connect("gpu-a1");
    f.connect("gpu-b1", { ib: null, labels: {} });
    f.catalog(llama70b(1));
    f.run();
    const [r] = f.replicasOf("llama-3.3-70b");
    const s = r?.shards[0];
    f.shard(s?.nodeId as string, r?.replicaId as string, s?.shardId as string, ShardStatus_State.STOPPED);
    const out = f.step();
    const failed = ofKind(out.decisions, "replicaFailed")[0];
    assert.equal(failed?.reason, ReplicaFailed_Reason.UNREQUESTED_STOP);
    assert.ok(kinds(out.decisions).includes("cooldownStarted"));
    const placed = ofKind(out.decisions, "replicaPlaced")[0];
    assert.notEqual(placed?.chosen?.nodeIds[0], s?.nodeId, "the cooldown sends the replacement elsewhere");
  });

  it("does not re-issue a command whose session is gone", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.catalog(llama70b(1));
    f.settle();
    f.disconnect("gpu-a1").advance(f.config.commandTimeoutMs);
    assert.ok(!kinds(f.step().decisions).includes("commandReissued"));
  });

  it("stops re-sending a start once the shard reports STARTING", () => {
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
