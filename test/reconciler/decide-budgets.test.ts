import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { resolveMinAvailable } from "../../src/projections/index.js";
import { disruptionBudget } from "../../src/reconciler/decide/budgets.js";
import { drainUnit } from "../../src/reconciler/decide/drains.js";
import { Pass } from "../../src/reconciler/decide/pass.js";
import { Fleet, kinds, llama70b, type ModelInit, ofKind } from "../support/fleet.js";

const M70 = "llama-3.3-70b";

function withBudget(m: ModelInit, minAvailable: string): ModelInit & { minAvailable: string } {
  return { ...m, minAvailable };
}

/** A pass on `f`'s state: end it before the next (its fork holds the state's tables). */
function passOf(f: Fleet): Pass {
  return new Pass({ state: f.state, config: f.config, nowMs: f.nowMs, liveGateways: f.live });
}

/** The disruption budget a new pass on `f` sees for `model`, the pass ended. */
function budgetOf(f: Fleet, model: string): ReturnType<typeof disruptionBudget> {
  const pass = passOf(f);
  try {
    return disruptionBudget(pass, model);
  } finally {
    pass.end();
  }
}

/** Two 4-GPU nodes, one llama-3.3-70b (tp4) replica on each, both running: no room for a third. */
function twoFullNodes(minAvailable?: string): Fleet {
  const f = new Fleet();
  f.endpointOf = (nodeId, shardId) => `http://${nodeId}:8000/${shardId}`;
  f.connect("gpu-a1", { gpus: 4 });
  f.connect("gpu-a2", { gpus: 4 });
  f.catalog(minAvailable === undefined ? llama70b(2) : withBudget(llama70b(2), minAvailable));
  f.run();
  assert.equal(f.replicasOf(M70).filter((r) => r.phase === "running").length, 2);
  return f;
}

function onNode(f: Fleet, nodeId: string) {
  const r = f.replicasOf(M70).find((x) => x.shards.some((s) => s.nodeId === nodeId));
  assert.ok(r, `a replica on ${nodeId}`);
  return r;
}

describe("disruption budget: the count", () => {
  it("reads a count as written and a percentage of desired rounded up", () => {
    assert.equal(resolveMinAvailable("2", 4), 2);
    assert.equal(resolveMinAvailable("75%", 4), 3);
    assert.equal(resolveMinAvailable("75%", 3), 3, "2.25 rounds up");
    assert.equal(resolveMinAvailable("50%", 3), 2);
    assert.equal(resolveMinAvailable("0%", 8), 0);
    assert.equal(resolveMinAvailable("100%", 8), 8);
    assert.equal(resolveMinAvailable(undefined, 8), 0, "no budget keeps nothing");
  });

  it("allows taking ready replicas above minAvailable; none without ready ones", () => {
    const f = twoFullNodes("1");
    const b = budgetOf(f, M70);
    assert.deepEqual(b, { model: M70, desired: 2, stated: "1", minAvailable: 1, ready: 2, allowed: 1 });
    assert.equal(budgetOf(twoFullNodes("100%"), M70).allowed, 0);
    const none = budgetOf(twoFullNodes(), M70);
    assert.equal(none.stated, undefined);
    assert.equal(none.allowed, 2, "without a budget every ready replica may go");
    assert.equal(budgetOf(f, "not-in-catalog").allowed, 0);
  });

  it("counts what this pass already took out of service (a drain started earlier in the pass)", () => {
    const f = twoFullNodes("1");
    const pass = passOf(f);
    const r = onNode(f, "gpu-a1");
    assert.ok(pass.add(drainUnit(pass, pass.work.replicas.replicas.get(r.replicaId) ?? r, "", "test")));
    const b = disruptionBudget(pass, M70);
    pass.end();
    assert.equal(b.ready, 1);
    assert.equal(b.allowed, 0);
  });
});

describe("decide: node drains honour disruption budgets", () => {
  it("without a budget a drain whose replacement cannot be placed waits silently, as before", () => {
    const f = twoFullNodes();
    f.drain("gpu-a1");
    const outs = f.run();
    const all = outs.flatMap((o) => kinds(o.decisions));
    assert.ok(all.includes("replicaCreated"));
    assert.ok(!all.includes("replicaDrainStarted"), "make-before-break: nothing drains");
    assert.ok(!all.includes("disruptionBlocked"));
  });

  it("a drain that would break minAvailable waits, says why once, and proceeds once the replacement is ready", () => {
    const f = twoFullNodes("2");
    const old = onNode(f, "gpu-a1");
    f.drain("gpu-a1");
    const outs = f.run();
    const blocked = outs.flatMap((o) => ofKind(o.decisions, "disruptionBlocked"));
    assert.equal(blocked.length, 1, "recorded once, not every pass");
    assert.equal(blocked[0]?.replicaId, old.replicaId);
    assert.equal(blocked[0]?.nodeId, "gpu-a1");
    assert.equal(blocked[0]?.ready, 2);
    assert.equal(blocked[0]?.minAvailable, 2);
    const text = outs
      .flatMap((o) => o.decisions)
      .find((d) => d.kind.case === "disruptionBlocked")?.explanation;
    assert.match(
      text ?? "",
      new RegExp(
        `^${old.replicaId} keeps serving: node gpu-a1 is draining, but ${M70} has 2 ready, minAvailable 2; taking it out would leave 1; waits until replacement \\S+ is ready$`,
      ),
    );
    assert.ok(!outs.flatMap((o) => kinds(o.decisions)).includes("replicaDrainStarted"));
    assert.equal(f.state.replicas.replicas.get(old.replicaId)?.disruptionBlocked, text);
    assert.deepEqual(f.settle(), [], "a wait already recorded is not recorded again");

    // Room appears: the replacement is placed, runs, and then the old replica drains.
    f.connect("gpu-a3", { gpus: 4 });
    const after = f.run();
    const drained = after.flatMap((o) => ofKind(o.decisions, "replicaDrainStarted"));
    assert.equal(drained[0]?.replicaId, old.replicaId);
    assert.equal(drained[0]?.replacementId, blocked[0]?.replacementId);
    assert.equal(f.state.replicas.replicas.get(old.replicaId), undefined, "drained and removed");
    assert.equal(f.replicasOf(M70).filter((r) => r.phase === "running").length, 2);
  });

  it("a budget with room lets a ready replica go before its replacement is ready", () => {
    const f = twoFullNodes("1");
    const old = onNode(f, "gpu-a1");
    f.drain("gpu-a1");
    const first = f.step();
    assert.deepEqual(kinds(first.decisions), ["replicaCreated", "replicaPending"]);
    f.obey(first);
    const second = f.step();
    const drain = ofKind(second.decisions, "replicaDrainStarted")[0];
    assert.equal(drain?.replicaId, old.replicaId);
    assert.match(
      drain?.reason ?? "",
      /node gpu-a1 is draining; llama-3.3-70b has 2 ready, minAvailable 1 allows one fewer/,
    );
    assert.ok(
      kinds(second.decisions).includes("endpointsChanged"),
      "it leaves the routing table in the same pass",
    );
  });

  it("two replicas on one draining node: the budget is shared within the pass", () => {
    const f = new Fleet();
    f.connect("gpu-a1", { gpus: 8 });
    f.connect("gpu-a2", { gpus: 4 });
    f.catalog(withBudget(llama70b(3), "2"));
    f.run();
    f.drain("gpu-a1");
    const outs = f.run();
    const drains = outs.flatMap((o) => ofKind(o.decisions, "replicaDrainStarted"));
    const blocked = outs.flatMap((o) => ofKind(o.decisions, "disruptionBlocked"));
    assert.equal(drains.length, 1, "3 ready, minAvailable 2: one may go");
    assert.equal(blocked.length, 1, "the second waits");
    assert.equal(blocked[0]?.ready, 2);
  });

  it("a new reason (fewer ready) is recorded again", () => {
    const f = twoFullNodes("2");
    const other = onNode(f, "gpu-a2");
    f.drain("gpu-a1");
    f.run();
    const shard = other.shards[0];
    assert.ok(shard);
    f.shard("gpu-a2", other.replicaId, shard.shardId, 5 /* FAILED */, "CUDA error");
    const outs = f.settle();
    const blocked = outs.flatMap((o) => ofKind(o.decisions, "disruptionBlocked"));
    assert.equal(blocked.length, 1);
    assert.equal(blocked[0]?.ready, 1);
  });

  it("GPU-fault moves honour the same budget", () => {
    const f = twoFullNodes("100%");
    const old = onNode(f, "gpu-a1");
    f.gpuProblem("gpu-a1", old.shards[0]?.gpuIndices[0] ?? 0);
    const outs = f.run();
    const blocked = outs.flatMap((o) => o.decisions).filter((d) => d.kind.case === "disruptionBlocked");
    assert.equal(blocked.length, 1);
    assert.match(
      blocked[0]?.explanation ?? "",
      /GPU \d of gpu-a1 has a problem .* minAvailable 2 \(100% of 2 desired\)/,
    );
  });
});
