import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { StartShard } from "../../src/gen/llmgw/v1/agent_pb.js";
import type { Command } from "../../src/gen/llmgw/v1/events_pb.js";
import { rendezvousPort } from "../../src/reconciler/decide/start-shard.js";
import { Fleet, kinds, llama8b, llama70b, llama405b, model, ofKind } from "../support/fleet.js";

/** A fleet whose nodes are adopted, with the catalog applied afterwards. */
function fleet(
  nodes: Record<string, Parameters<Fleet["connect"]>[1]>,
  config: Partial<Fleet["config"]> = {},
) {
  const f = new Fleet(config);
  for (const [id, spec] of Object.entries(nodes)) f.connect(id, spec);
  f.settle();
  return f;
}

describe("decide: placement", () => {
  it("counts the nodes ruled out by each reason when nothing fits, and says it once", () => {
    const f = fleet({
      "gpu-a1": { ib: "ib-pod-1" },
      "gpu-b1": { ib: "ib-pod-2" },
      "gpu-c1": { ib: "ib-pod-3", problems: { 0: ["Xid 79: GPU has fallen off the bus"] } },
      "gpu-c2": { ib: "ib-pod-3" },
      "gpu-d1": {},
      "gpu-e1": {},
    });
    f.cordon("gpu-d1");
    f.disconnect("gpu-e1").advance(f.config.suspectAfterMs);
    f.settle();
    f.catalog(llama405b(1));
    const out = f.step();
    assert.deepEqual(kinds(out.decisions), ["replicaCreated", "replicaPending"]);
    const pending = ofKind(out.decisions, "replicaPending")[0];
    assert.equal(
      out.decisions[1]?.explanation,
      "0/6 nodes fit: 3 no 2-node infiniband fabric, 1 cordoned, 1 suspect, 1 too few healthy GPUs",
    );
    assert.equal(pending?.nodesConsidered, 6);
    assert.equal(pending?.nodesFit, 0);
    assert.deepEqual(f.settle(), [], "an unchanged reason is not repeated");
    f.uncordon("gpu-d1");
    const placed = f.step();
    assert.deepEqual(kinds(placed.decisions), ["replicaPlaced"]);
    assert.deepEqual(ofKind(placed.decisions, "replicaPlaced")[0]?.chosen?.nodeIds, ["gpu-a1", "gpu-d1"]);
  });

  it("places a 2-node replica on one fabric with ranks, world size and peers in rank order", () => {
    const f = fleet({ "gpu-a1": {}, "gpu-a2": {} });
    f.catalog(llama405b(1));
    const out = f.step();
    const p = ofKind(out.decisions, "replicaPlaced")[0];
    assert.deepEqual(
      p?.shards.map((s) => [s.rank, s.nodeId, s.gpuIndices.length]),
      [
        [0, "gpu-a1", 8],
        [1, "gpu-a2", 8],
      ],
    );
    assert.equal(out.commands.length, 2);
    for (const [i, c] of out.commands.entries()) {
      assert.equal(c.action.case, "start");
      if (c.action.case !== "start") continue;
      assert.equal(c.action.value.rank, i);
      assert.equal(c.action.value.worldSize, 2);
      assert.deepEqual(c.action.value.peers, ["gpu-a1", "gpu-a2"]);
      assert.deepEqual(c.action.value.engineArgs, ["--tensor-parallel-size", "8"]);
      assert.equal(c.attempt, 1);
      assert.equal(c.deadlineUnixMs, BigInt(f.nowMs + f.config.commandTimeoutMs));
      assert.equal(c.sessionId, f.state.inventory.nodes.get(c.nodeId)?.session?.sessionId);
    }
  });

  it("derives the rendezvous port from the replica id with FNV-1a 32-bit", () => {
    // Published FNV-1a vectors: "" hashes to 0x811c9dc5, "foobar" to 0xbf9cf968.
    assert.equal(rendezvousPort(""), 29500 + (0x811c9dc5 % 1000));
    assert.equal(rendezvousPort("foobar"), 29500 + (0xbf9cf968 % 1000));
    assert.notEqual(rendezvousPort("llama-3.1-405b-1"), rendezvousPort("llama-3.1-405b-2"));
  });

  it("tells every rank of a 2-node replica rank 0's advertised address, one port, and the engine, the same again on a re-send", () => {
    const f = fleet(
      { "gpu-a1": { advertiseAddress: "10.0.0.1" }, "gpu-a2": { advertiseAddress: "10.0.0.2" } },
      { startTimeoutMs: 5_000, startAttempts: 3 },
    );
    f.catalog(
      model("llama-3.1-405b", 1, {
        name: "tp8-pp2",
        shards: 2,
        gpus: 8,
        memGb: 72,
        fabric: "infiniband",
        engine: "vllm-nightly",
      }),
    );
    const first = starts(f.step().commands);
    assert.equal(first.length, 2);
    const replicaId = first[0]?.replicaId as string;
    for (const s of first) {
      assert.equal(s.masterAddr, "10.0.0.1", `rank ${s.rank} rendezvous at rank 0's address`);
      assert.equal(s.masterPort, rendezvousPort(replicaId));
      assert.equal(s.engine, "vllm-nightly");
      assert.equal(s.worldSize, 2);
    }
    // Neither shard reports STARTING: both starts are sent again, saying exactly what the first did.
    f.advance(5_000);
    const again = [...starts(f.step().commands), ...starts(f.step().commands)];
    assert.deepEqual(
      again.map((s) => s.shardId).sort(),
      first.map((s) => s.shardId).sort(),
      "both starts are re-sent",
    );
    for (const s of again) {
      assert.deepEqual(
        s,
        first.find((x) => x.shardId === s.shardId),
      );
    }
  });

  it("falls back to rank 0's node id when it advertised no address, and to the default engine", () => {
    const f = fleet({ "gpu-a1": {}, "gpu-a2": { advertiseAddress: "10.0.0.2" } });
    f.catalog(llama405b(1));
    const out = starts(f.step().commands);
    assert.deepEqual(
      out.map((s) => [s.rank, s.masterAddr, s.engine]),
      [
        [0, "gpu-a1", "default"],
        [1, "gpu-a1", "default"],
      ],
    );
    assert.equal(new Set(out.map((s) => s.masterPort)).size, 1, "one port for every rank");
    const single = fleet({ "gpu-b1": { advertiseAddress: "10.0.0.9" } });
    single.catalog(llama70b(1));
    const [alone] = starts(single.step().commands);
    assert.deepEqual(
      [alone?.worldSize, alone?.masterAddr, alone?.masterPort, alone?.peers],
      [1, "", 0, []],
      "a single-node replica has no rendezvous",
    );
  });

  it("counts memory foreign processes use, and keeps a node with node-level problems out", () => {
    const f = fleet({
      "gpu-a1": { usedGb: [40, 40, 40, 40, 40, 40, 40, 0] },
      "gpu-b1": {},
    });
    f.usage("gpu-b1", [0, 0, 0, 0, 0, 0, 0, 0], ["ECC errors"]);
    f.catalog(llama70b(1));
    const out = f.step();
    assert.equal(
      out.decisions[1]?.explanation,
      "0/2 nodes fit: 1 too few healthy GPUs, 1 too little free memory",
    );
  });

  it("binpack fills the fuller node; spread picks the emptier; ties go to the lower node id", () => {
    for (const [policy, expected] of [
      ["binpack", "gpu-b1"],
      ["spread", "gpu-c1"],
    ] as const) {
      const f = new Fleet({ policy });
      f.catalog(llama8b(1));
      const running = [{ shard: "x-s0", replica: "x", model: "llama-3.1-8b", profile: "tp1", gpus: [0] }];
      f.connect("gpu-b1", { running });
      f.connect("gpu-c1");
      f.settle();
      f.catalog(llama8b(1), llama70b(1));
      const out = f.step();
      const placed = ofKind(out.decisions, "replicaPlaced")[0];
      assert.equal(placed?.policy, policy);
      assert.deepEqual(placed?.chosen?.nodeIds, [expected], policy);
      assert.equal(placed?.runnersUp.length, 1);
    }
  });

  it("spreads one model's replicas across nodes, and two replicas of one pass never share GPUs", () => {
    const f = fleet({ "gpu-a1": {}, "gpu-a2": {} });
    f.catalog(llama70b(3));
    const out = f.step();
    const placed = ofKind(out.decisions, "replicaPlaced");
    assert.deepEqual(
      placed.map((p) => `${p.shards[0]?.nodeId}:${p.shards[0]?.gpuIndices.join("")}`),
      ["gpu-a1:0123", "gpu-a2:0123", "gpu-a1:4567"],
    );
    assert.match(
      out.decisions.find((d) => d.kind.case === "replicaPlaced")?.explanation ?? "",
      /runners-up gpu-a2/,
    );
  });

  it("honours labels, the GPU product and cooldowns", () => {
    const f = fleet({
      "gpu-a1": { labels: { pool: "batch" } },
      "l40-b1": { product: "NVIDIA L40S", memoryGb: 48, gpus: 4, labels: { pool: "general" } },
      "gpu-c1": { labels: { pool: "general" } },
    });
    f.apply({
      case: "reconcilePass",
      value: {
        nowUnixMs: BigInt(f.nowMs),
        decisions: [
          {
            kind: {
              case: "cooldownStarted",
              value: {
                model: "llama-3.3-70b",
                nodeId: "gpu-c1",
                failures: 3,
                untilUnixMs: BigInt(f.nowMs + 60_000),
              },
            },
          },
        ],
      },
    });
    f.catalog(model("llama-3.3-70b", 1, { name: "tp4", gpus: 4, memGb: 72, labels: { pool: "general" } }));
    const out = f.step();
    assert.equal(
      out.decisions[1]?.explanation,
      "0/3 nodes fit: 1 cooldown, 1 labels mismatch, 1 no H100 GPUs",
    );
    assert.equal(out.nextDeadlineMs, f.nowMs + 60_000, "the cooldown's end is the next deadline");
    f.advance(60_000);
    assert.deepEqual(ofKind(f.step().decisions, "replicaPlaced")[0]?.chosen?.nodeIds, ["gpu-c1"]);
  });

  it("uses the first profile that fits, in preference order, and names every profile when none does", () => {
    const f = fleet({ "gpu-a1": { gpus: 4 } });
    f.catalog(
      model("llama-3.3-70b", 2, { name: "tp8", gpus: 8, memGb: 40 }, { name: "tp4", gpus: 4, memGb: 72 }),
    );
    const out = f.step();
    assert.deepEqual(kinds(out.decisions), [
      "replicaCreated",
      "replicaCreated",
      "replicaPlaced",
      "replicaPending",
    ]);
    assert.equal(ofKind(out.decisions, "replicaPlaced")[0]?.profile, "tp4");
    assert.equal(
      out.decisions[3]?.explanation,
      "no profile fits: tp8: 0/1 nodes fit: 1 too few healthy GPUs; tp4: 0/1 nodes fit: 1 too few free GPUs",
    );
  });
});

/** The StartShards among commands, in order. */
function starts(commands: readonly Command[]): StartShard[] {
  return commands.flatMap((c) => (c.action.case === "start" ? [c.action.value] : []));
}
