import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Fleet, kinds, llama8b, llama70b, ofKind, registration } from "../support/fleet.js";

const M8 = "llama-3.1-8b";
const M70 = "llama-3.3-70b";

function gpusOf(f: Fleet, model: string): number[] {
  return f
    .replicasOf(model)
    .filter((r) => r.phase !== "draining")
    .flatMap((r) => r.shards.flatMap((s) => s.gpuIndices))
    .sort((a, b) => a - b);
}

describe("decide: GPU faults", () => {
  it("a shard on a GPU that turns faulty is replaced make-before-break, on the same node's healthy GPUs", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.catalog(llama70b(1));
    f.run();
    const [old] = f.replicasOf(M70);
    const onGpu = old?.shards[0]?.gpuIndices[0] as number;
    f.gpuProblem("gpu-a1", onGpu);
    const out = f.step();
    assert.deepEqual(kinds(out.decisions), ["replicaCreated", "replicaPlaced"]);
    assert.equal(ofKind(out.decisions, "replicaCreated")[0]?.replaces, old?.replicaId);
    assert.match(
      out.decisions[0]?.explanation ?? "",
      new RegExp(`GPU ${onGpu} of gpu-a1 has a problem \\(xid: Xid 79`),
    );
    const placed = ofKind(out.decisions, "replicaPlaced")[0]?.shards[0];
    assert.equal(placed?.nodeId, "gpu-a1", "only the faulty GPU left placement, not the node");
    assert.ok(!placed?.gpuIndices.includes(onGpu));
    assert.deepEqual(
      out.commands.map((c) => c.action.case),
      ["start"],
      "nothing is stopped before the replacement runs",
    );
    assert.deepEqual(f.settle(), [], "the old replica keeps serving until its replacement runs");
    f.obey(out);
    const swap = f.step();
    assert.deepEqual(kinds(swap.decisions), ["replicaDrainStarted"]);
    assert.match(
      ofKind(swap.decisions, "replicaDrainStarted")[0]?.reason ?? "",
      /GPU \d of gpu-a1 has a problem/,
    );
    assert.deepEqual(
      swap.commands.map((c) => c.action.case),
      ["drain"],
    );
    f.obey(swap);
    assert.deepEqual(kinds(f.step().decisions), ["replicaRemoved"]);
    assert.deepEqual(f.settle(), []);
  });

  it("a shard on a GPU the node registers again without is moved: the gone GPU counts as faulty", () => {
    // The replica's first GPU, or one of its middle ones.
    for (const which of [0, 2]) {
      const f = new Fleet();
      f.connect("gpu-a1");
      f.catalog(llama70b(1));
      f.run();
      const [old] = f.replicasOf(M70);
      const gpus = old?.shards[0]?.gpuIndices ?? [];
      // The GPU falls off the bus: a re-registration on the live stream lists the node without it.
      const lost = gpus[which] as number;
      const reg = registration("gpu-a1");
      reg.gpus = reg.gpus?.filter((g) => g.index !== lost) ?? [];
      const sessionId = f.state.inventory.nodes.get("gpu-a1")?.session?.sessionId ?? "";
      f.apply({ case: "hardwareChanged", value: { nodeId: "gpu-a1", sessionId, registration: reg } });
      assert.equal(
        f.state.inventory.nodes.get("gpu-a1")?.gpus.some((g) => g.index === lost),
        false,
        "the fold took the GPU out",
      );
      const out = f.step();
      assert.deepEqual(kinds(out.decisions), ["replicaCreated", "replicaPlaced"]);
      assert.equal(ofKind(out.decisions, "replicaCreated")[0]?.replaces, old?.replicaId);
      assert.match(
        out.decisions[0]?.explanation ?? "",
        new RegExp(`GPU ${lost} of gpu-a1 is no longer registered`),
      );
      const placed = ofKind(out.decisions, "replicaPlaced")[0]?.shards[0];
      assert.ok(placed && !placed.gpuIndices.includes(lost), "the replacement is not on the gone GPU");
      f.obey(out);
      const swap = f.step();
      assert.deepEqual(kinds(swap.decisions), ["replicaDrainStarted"]);
      f.obey(swap);
      assert.deepEqual(kinds(f.step().decisions), ["replicaRemoved"]);
      assert.deepEqual(f.settle(), []);
    }
  });

  it("a faulty GPU takes no new work; the other seven do; clearing returns it", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.gpuProblem("gpu-a1", 3);
    f.catalog(llama8b(8));
    f.run();
    assert.deepEqual(gpusOf(f, M8), [0, 1, 2, 4, 5, 6, 7]);
    assert.equal(f.replicasOf(M8).filter((r) => r.phase === "pending").length, 1);
    f.clearGpu("gpu-a1", 3);
    f.run();
    assert.deepEqual(gpusOf(f, M8), [0, 1, 2, 3, 4, 5, 6, 7]);
  });

  it("a cordoned GPU keeps new work off and moves nothing; uncordon lets it take work", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.catalog(llama8b(1));
    f.run();
    const held = gpusOf(f, M8)[0] as number;
    f.cordonGpu("gpu-a1", held);
    f.cordonGpu("gpu-a1", 7);
    assert.deepEqual(f.settle(), [], "what runs on a cordoned GPU stays");
    f.catalog(llama8b(8));
    const out = f.step();
    assert.equal(ofKind(out.decisions, "replicaPending").length, 1);
    assert.match(
      out.decisions.find((d) => d.kind.case === "replicaPending")?.explanation ?? "",
      /1 too few free GPUs/,
    );
    f.obey(out).run();
    assert.ok(!gpusOf(f, M8).includes(7));
    f.uncordonGpu("gpu-a1", 7);
    f.run();
    assert.deepEqual(gpusOf(f, M8), [0, 1, 2, 3, 4, 5, 6, 7]);
  });

  it("cordoned GPUs are named when they are what rules a node out", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    for (const i of [0, 1, 2, 3, 4]) f.cordonGpu("gpu-a1", i);
    f.catalog(llama70b(1));
    const pending = f
      .settle()
      .flatMap((o) => o.decisions)
      .filter((d) => d.kind.case === "replicaPending");
    assert.equal(pending[0]?.explanation, "0/1 nodes fit: 1 too few uncordoned GPUs");
  });

  it("node-level problems keep new work off the node but move nothing; clearing them returns the node", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.catalog(llama8b(1));
    f.run();
    f.usage("gpu-a1", [20, 0, 0, 0, 0, 0, 0, 0], ["NVLink down"]);
    assert.deepEqual(f.settle(), []);
    f.catalog(llama8b(2));
    f.run();
    assert.equal(f.replicasOf(M8).filter((r) => r.phase === "pending").length, 1);
    f.clearGpu("gpu-a1", 0, true);
    f.run();
    assert.equal(f.replicasOf(M8).filter((r) => r.phase === "running").length, 2);
  });
});
