/**
 * check-log's `placed-on-unavailable-gpu`: no placement on a GPU with a
 * problem, a cordoned GPU, or a node with node-level problems, judged at the
 * sequence the pass observed. The clean history is the real decide's.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { checkLog } from "../../src/invariants/index.js";
import { Fleet, llama8b } from "../support/fleet.js";

/** A pass placing a one-GPU replica on `gpu` of gpu-1, decided on the log up to `observedSeq`. */
function placeOn(f: Fleet, gpu: number, observedSeq: number): void {
  const sessionId = f.state.inventory.nodes.get("gpu-1")?.session?.sessionId ?? "";
  f.handPass(
    [
      {
        explanation: "created",
        kind: { case: "replicaCreated", value: { replicaId: "x-1", model: "m" } },
      },
      {
        explanation: "placed",
        kind: {
          case: "replicaPlaced",
          value: {
            replicaId: "x-1",
            model: "m",
            profile: "tp1",
            shards: [{ shardId: "x-1-s0", rank: 0, nodeId: "gpu-1", sessionId, gpuIndices: [gpu] }],
          },
        },
      },
    ],
    { observedSeq },
  );
}

const gpuRule = (f: Fleet) =>
  checkLog(f.events).violations.filter((v) => v.rule === "placed-on-unavailable-gpu");

describe("checkLog: placed-on-unavailable-gpu", () => {
  it("holds over the real reconciler replacing a shard off a faulty GPU, a cordon and a clear", () => {
    const f = new Fleet();
    f.connect("gpu-1");
    f.catalog(llama8b(7));
    f.run();
    f.gpuProblem("gpu-1", 3);
    f.cordonGpu("gpu-1", 5);
    f.run();
    f.catalog(llama8b(8));
    f.run();
    f.clearGpu("gpu-1", 3);
    f.uncordonGpu("gpu-1", 5);
    f.run();
    assert.deepEqual(checkLog(f.events).violations, []);
  });

  it("flags a placement on a GPU with a problem the pass had seen", () => {
    const f = new Fleet();
    f.connect("gpu-1");
    f.gpuProblem("gpu-1", 3);
    placeOn(f, 3, f.state.seq);
    const vs = gpuRule(f);
    assert.equal(vs.length, 1);
    assert.match(vs[0]?.message ?? "", /places x-1 on GPU 3 of gpu-1, unavailable since \d+ \(problem\)/);
  });

  it("flags a cordoned GPU and a node with node-level problems; not once cleared or uncordoned", () => {
    const f = new Fleet();
    f.connect("gpu-1");
    f.cordonGpu("gpu-1", 2);
    placeOn(f, 2, f.state.seq);
    f.uncordonGpu("gpu-1", 2);
    placeOn(f, 2, f.state.seq);
    f.usage("gpu-1", [0, 0, 0, 0, 0, 0, 0, 0], ["NVLink down"]);
    placeOn(f, 6, f.state.seq);
    f.clearGpu("gpu-1", 0, true);
    placeOn(f, 6, f.state.seq);
    assert.deepEqual(
      gpuRule(f).map((v) => /\((.*)\); the pass/.exec(v.message)?.[1]),
      ["cordoned", "node-level problem"],
    );
  });

  it("does not flag a problem that landed after the sequence the pass observed", () => {
    const f = new Fleet();
    f.connect("gpu-1");
    const observed = f.state.seq;
    f.gpuProblem("gpu-1", 3);
    placeOn(f, 3, observed);
    assert.deepEqual(gpuRule(f), []);
  });
});
