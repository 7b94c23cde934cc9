/**
 * A node drain during a rollout honours the rollout's maxUnavailable as
 * well as the model's disruption budget (found by `llmgw simulate --seed 8`:
 * chat-small, minAvailable 50%, rolling with maxUnavailable 0; a drain took
 * a ready replica before its replacement was ready, 50 → 49 ready of 50).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { checkLog } from "../../src/invariants/index.js";
import { isReady } from "../../src/projections/index.js";
import { Fleet, kinds, llama8b, type ModelInit, ofKind } from "../support/fleet.js";

const M8 = "llama-3.1-8b";

const budgeted = (args: string[]): ModelInit => ({
  ...llama8b(4),
  minAvailable: "50%",
  profiles: llama8b(4).profiles.map((p) => ({ ...p, engineArgs: args })),
});

const unbudgeted = (args: string[]): ModelInit => ({
  ...llama8b(4),
  profiles: llama8b(4).profiles.map((p) => ({ ...p, engineArgs: args })),
});

const readyOf = (f: Fleet) => f.replicasOf(M8).filter(isReady).length;

/** Four ready replicas on gpu-a1, room on gpu-a2; a rollout started, its first replacement not ready yet. */
function rolling(model = budgeted): { f: Fleet; started: ReturnType<Fleet["step"]> } {
  const f = new Fleet();
  f.connect("gpu-a1", { gpus: 4 });
  f.catalog(model(["--v1"]));
  f.run();
  f.connect("gpu-a2", { gpus: 8 });
  f.run();
  assert.equal(readyOf(f), 4);
  f.catalog(model(["--v2"]));
  const started = f.step();
  assert.ok(kinds(started.decisions).includes("rolloutStarted"), kinds(started.decisions).join(", "));
  return { f, started };
}

describe("decide: a node drain during a rollout", () => {
  it("keeps a ready replica until its replacement is ready, though minAvailable alone would let it go", () => {
    const { f } = rolling();
    f.drain("gpu-a1");
    const outs = f.settle();
    const all = outs.flatMap((o) => o.decisions);
    const drained = ofKind(all, "replicaDrainStarted");
    assert.deepEqual(drained, [], "nothing ready leaves while every replacement is on its way");
    const blocked = all.filter((d) => d.kind.case === "disruptionBlocked");
    assert.ok(blocked.length > 0, `decided ${kinds(all).join(", ")}`);
    assert.match(
      blocked[0]?.explanation ?? "",
      /keeps serving: node gpu-a1 is draining, but llama-3.1-8b rolls with 4 ready, and its rollout keeps 4 \(4 desired − maxUnavailable 0\); taking it out would leave 3; waits until replacement \S+ is ready$/,
    );
    assert.equal(readyOf(f), 4);
  });

  it("without a budget, records no block while the replacement is on its way: the replica waits for it anyway", () => {
    const { f } = rolling(unbudgeted);
    f.drain("gpu-a1");
    const all = f.settle().flatMap((o) => o.decisions);
    assert.deepEqual(
      ofKind(all, "replicaDrainStarted"),
      [],
      "nothing ready leaves while every replacement is on its way",
    );
    assert.deepEqual(
      all.filter((d) => d.kind.case === "disruptionBlocked").map((d) => d.explanation),
      [],
      "no floor is said to hold a replica that waits for its replacement in any case",
    );
    assert.equal(readyOf(f), 4);
  });

  it("drains once replacements are ready, never below desired − maxUnavailable, and check-log agrees", () => {
    const { f, started } = rolling();
    f.drain("gpu-a1");
    // The agents now start what they are told; everything moves to gpu-a2.
    f.obey(started);
    for (let i = 0; i < 30; i++) {
      const out = f.step();
      assert.ok(readyOf(f) >= 4, `pass ${i}: ${readyOf(f)} ready (${kinds(out.decisions).join(", ")})`);
      if (out.decisions.length === 0 && out.commands.length === 0) break;
      f.obey(out);
    }
    assert.equal(readyOf(f), 4);
    assert.ok(
      f.replicasOf(M8).every((r) => r.shards.every((s) => s.nodeId === "gpu-a2")),
      "every replica left the draining node",
    );
    assert.deepEqual(
      checkLog(f.events).violations.map((v) => `${v.rule}: ${v.message}`),
      [],
    );
  });
});
