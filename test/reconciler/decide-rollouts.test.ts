import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { checkLog } from "../../src/invariants/index.js";
import { isReady } from "../../src/projections/index.js";
import { Fleet, kinds, llama8b, type ModelInit, ofKind } from "../support/fleet.js";

const M8 = "llama-3.1-8b";

/** The 8B model with other engine arguments: a new spec revision. */
function withArgs(m: ModelInit, args: string[], rollout?: ModelInit["rollout"]): ModelInit {
  return {
    ...m,
    profiles: m.profiles.map((p) => ({ ...p, engineArgs: args })),
    ...(rollout ? { rollout } : {}),
  };
}

const rolloutOf = (f: Fleet) => f.state.replicas.rollouts[M8];
const readyOf = (f: Fleet) => f.replicasOf(M8).filter(isReady).length;
const revisions = (f: Fleet) =>
  f
    .replicasOf(M8)
    .filter((r) => r.phase !== "draining")
    .map((r) => r.revision)
    .sort();

describe("decide: spec revisions and rollouts", () => {
  it("records the profile's revision on every placement; lifecycle deadlines do not change it", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.catalog(llama8b(2));
    f.run();
    const rev = f.state.replicas.catalog.models[0]?.profiles[0]?.revision ?? "";
    assert.match(rev, /^[0-9a-f]{8}$/);
    assert.deepEqual(revisions(f), [rev, rev]);
    const slower = {
      ...llama8b(2),
      profiles: llama8b(2).profiles.map((p) => ({ ...p, readyTimeoutMs: 99_000 })),
    };
    f.catalog(slower);
    assert.equal(f.state.replicas.catalog.models[0]?.profiles[0]?.revision, rev);
    assert.deepEqual(f.settle(), [], "a deadline change rolls nothing");
  });

  it("rolls 8 replicas one at a time, make-before-break, never below 8 ready", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.connect("gpu-a2");
    f.catalog(llama8b(8));
    f.run();
    assert.equal(readyOf(f), 8);
    f.catalog(withArgs(llama8b(8), ["--max-model-len", "8192"]));
    const next = f.state.replicas.catalog.models[0]?.profiles[0]?.revision;
    const first = f.step();
    assert.deepEqual(kinds(first.decisions), ["rolloutStarted", "replicaCreated", "replicaPlaced"]);
    assert.equal(ofKind(first.decisions, "rolloutStarted")[0]?.outdated, 8);
    assert.deepEqual(
      first.commands.map((c) => c.action.case),
      ["start"],
      "nothing old leaves before the new one runs",
    );
    let passes = 0;
    let out = first;
    while (passes++ < 40) {
      f.obey(out);
      assert.ok(readyOf(f) >= 8, `ready ${readyOf(f)} after pass ${passes}`);
      out = f.step();
      if (out.decisions.length === 0 && out.commands.length === 0) break;
      // In a pass that drains an old replica, one new replica got ready just before.
      const drains = ofKind(out.decisions, "replicaDrainStarted").length;
      assert.ok(drains <= 1, "at most one old replica leaves at a time (maxSurge 1, maxUnavailable 0)");
    }
    assert.deepEqual(revisions(f), Array(8).fill(next));
    assert.equal(f.state.replicas.rollouts[M8]?.active, false);
    assert.ok((f.state.replicas.rollouts[M8]?.completedSeq ?? 0) > 0);
    assert.deepEqual(
      checkLog(f.events).violations.filter((v) => v.rule === "rollout-below-ready"),
      [],
    );
  });

  it("a new replica that fails stalls the rollout; the old ones keep serving; undo rolls the failed one back", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.connect("gpu-a2");
    const good = llama8b(8);
    f.catalog(good);
    f.run();
    const oldRev = revisions(f)[0];
    f.catalog(withArgs(good, ["--broken"]));
    const first = f.step();
    f.obey(first, "failed");
    const stall = f.step();
    assert.ok(kinds(stall.decisions).includes("replicaFailed"));
    const stalled = ofKind(stall.decisions, "rolloutStalled")[0];
    assert.ok(stalled, `stalled: ${kinds(stall.decisions)}`);
    assert.match(stalled.reason, /failed .*CUDA out of memory/);
    assert.equal(f.state.replicas.rollouts[M8]?.stalled?.replicaId, stalled.replicaId);
    // Time passes, the failed replica is retried and fails again: nothing old leaves, nothing more is created.
    for (let i = 0; i < 5; i++) {
      f.advance(60_000);
      const out = f.step();
      assert.equal(ofKind(out.decisions, "replicaCreated").length, 0);
      assert.equal(ofKind(out.decisions, "replicaDrainStarted").length, 0);
      f.obey(out, "failed");
    }
    assert.equal(readyOf(f), 8);
    // Undo: the old spec again.
    f.catalog(good);
    f.run();
    assert.deepEqual(revisions(f), Array(8).fill(oldRev));
    assert.equal(f.replicasOf(M8).length, 8);
    assert.equal(f.state.replicas.rollouts[M8]?.active, false);
    assert.deepEqual(
      checkLog(f.events).violations.filter((v) => v.rule === "rollout-below-ready"),
      [],
    );
  });

  it("a new replica not ready within the progress deadline stalls the rollout, with the reason", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.catalog(llama8b(2));
    f.run();
    f.catalog(withArgs(llama8b(2), ["--slow"], { progressDeadlineMs: 30_000 }));
    const out = f.step();
    assert.ok(
      (out.nextDeadlineMs ?? Number.POSITIVE_INFINITY) <= f.nowMs + 30_000,
      "a pass is due by the deadline",
    );
    f.advance(31_000);
    const late = f.step();
    const stalled = ofKind(late.decisions, "rolloutStalled")[0];
    assert.match(stalled?.reason ?? "", /not ready 31s after it was created \(progress deadline 30s/);
  });

  it("maxUnavailable 1 and maxSurge 0: one old replica drains first, its slot is placed on the new revision", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.catalog(llama8b(8));
    f.run();
    f.catalog(withArgs(llama8b(8), ["--x"], { maxSurge: 0, maxUnavailable: 1 }));
    const out = f.step();
    assert.deepEqual(kinds(out.decisions).slice(0, 2), ["rolloutStarted", "replicaDrainStarted"]);
    assert.equal(ofKind(out.decisions, "replicaCreated").length, 1, "the scale rule refills the slot");
    f.obey(out);
    f.run(60);
    assert.equal(new Set(revisions(f)).size, 1);
    assert.equal(readyOf(f), 8);
    assert.deepEqual(
      checkLog(f.events).violations.filter((v) => v.rule === "rollout-below-ready"),
      [],
    );
  });

  it("a disruption budget binds a rollout's maxUnavailable: with minAvailable 100% no ready replica leaves first", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.catalog(llama8b(4));
    f.run();
    assert.equal(readyOf(f), 4);
    f.catalog({ ...withArgs(llama8b(4), ["--x"], { maxSurge: 1, maxUnavailable: 2 }), minAvailable: "100%" });
    for (let i = 0; i < 40; i++) {
      const out = f.step();
      // As the pass leaves it, before any agent acts on it.
      assert.ok(readyOf(f) >= 4, `ready ${readyOf(f)} after pass ${i}: the budget keeps all 4`);
      f.obey(out);
    }
    assert.deepEqual(new Set(revisions(f)).size, 1, "every replica ends on the new revision");
    assert.equal(readyOf(f), 4);
  });

  it("an adopted replica the log did not know takes its profile's revision in force; a known one keeps its own", () => {
    const f = new Fleet();
    f.catalog(llama8b(2));
    f.connect("gpu-a1", { running: [{ shard: "x-s0", replica: "x", model: M8, profile: "tp1", gpus: [0] }] });
    f.run();
    const rev = f.state.replicas.catalog.models[0]?.profiles[0]?.revision;
    assert.equal(f.state.replicas.replicas.get("x")?.revision, rev);
    assert.deepEqual(revisions(f), [rev, rev]);
    assert.ok(!(M8 in f.state.replicas.rollouts), "nothing rolled");
    // The spec changes; the agent restarts and reports x again: still the old revision, so it is rolled.
    f.catalog(withArgs(llama8b(2), ["--z"]));
    f.apply({ case: "rolloutPaused", value: { model: M8, operator: "ops", reason: "" } });
    f.step();
    const x = f.state.replicas.replicas.get("x");
    f.disconnect("gpu-a1").advance(1_000);
    f.connect("gpu-a1", {
      running: f.state.replicas.replicas.values().map((r) => ({
        shard: r.shards[0]?.shardId ?? "",
        replica: r.replicaId,
        model: M8,
        profile: "tp1",
        gpus: r.shards[0]?.gpuIndices ?? [],
      })),
    });
    f.step();
    assert.equal(f.state.replicas.replicas.get("x")?.revision, x?.revision);
    assert.equal(rolloutOf(f)?.active, true);
  });

  it("a paused rollout replaces nothing until resumed", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.catalog(llama8b(2));
    f.run();
    f.apply({ case: "rolloutPaused", value: { model: M8, operator: "ops", reason: "watch it" } });
    f.catalog(withArgs(llama8b(2), ["--y"]));
    assert.deepEqual(kinds(f.step().decisions), ["rolloutStarted"]);
    assert.deepEqual(f.settle(), []);
    f.apply({ case: "rolloutResumed", value: { model: M8, operator: "ops" } });
    f.run();
    assert.equal(new Set(revisions(f)).size, 1);
    assert.equal(f.state.replicas.rollouts[M8]?.active, false);
  });
});
