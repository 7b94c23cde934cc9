import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type AutoscaleSpec, LOAD_SAMPLES_MAX, readyCounts } from "../../src/projections/index.js";
import { autoscaleVerdict, readLoad } from "../../src/reconciler/decide/autoscale.js";
import { autoscaleOf } from "../../src/reconciler/decide/desired.js";
import { reconcilerConfigSchema } from "../../src/reconciler/index.js";
import { Fleet, kinds, llama8b, ofKind } from "../support/fleet.js";

const MODEL = "llama-3.1-8b";
const SPEC: AutoscaleSpec = {
  min: 1,
  max: 4,
  metric: "queue_depth",
  target: 10,
  tolerance: 0.1,
  upCooldownMs: 30_000,
  downCooldownMs: 120_000,
  stabilizationMs: 15_000,
};
const NODES = ["gpu-a1", "gpu-a2"];

/** llama-3.1-8b (1 GPU a replica) with an autoscale setting, starting at `replicas`. */
function autoscaled(replicas: number, spec: Partial<AutoscaleSpec> = {}) {
  const s = { ...SPEC, ...spec };
  return {
    ...llama8b(replicas),
    autoscale: {
      min: s.min,
      max: s.max,
      metric: s.metric,
      target: s.target,
      tolerance: s.tolerance,
      scaleUpCooldownMs: s.upCooldownMs,
      scaleDownCooldownMs: s.downCooldownMs,
      stabilizationMs: s.stabilizationMs,
    },
  };
}

/** Every running replica reports `queueDepth`, and again after the stabilization window: a steady load. */
function steadyLoad(f: Fleet, queueDepth: number): void {
  reportLoad(f, queueDepth);
  f.advance(SPEC.stabilizationMs);
  reportLoad(f, queueDepth);
}

/** Every running replica of the model reports `queueDepth` (what a gateway writes when load moved). */
function reportLoad(f: Fleet, queueDepth: number | ((replicaId: string) => number)): void {
  const byNode = new Map<string, Array<{ shardId: string; queueDepth: number }>>();
  for (const r of f.replicasOf(MODEL)) {
    if (r.phase !== "running") continue;
    for (const s of r.shards) {
      const q = typeof queueDepth === "number" ? queueDepth : queueDepth(r.replicaId);
      byNode.set(s.nodeId, [...(byNode.get(s.nodeId) ?? []), { shardId: s.shardId, queueDepth: q }]);
    }
  }
  for (const [node, loads] of byNode) f.load(node, loads);
}

function fleet(replicas: number, spec: Partial<AutoscaleSpec> = {}): Fleet {
  const f = Fleet.of([autoscaled(replicas, spec)], NODES);
  f.run();
  return f;
}

const decided = (out: ReturnType<Fleet["step"]>) => ofKind(out.decisions, "autoscaleDecided");
const desired = (f: Fleet) => readyCounts(f.state.replicas)[MODEL]?.desired;

describe("autoscale: the rule (pure)", () => {
  /** A load that stayed at `value` over the whole window. */
  const at = (value: number, ready: number) => ({ value, low: value, high: value, ready, covered: true });
  const T = 1_000_000;

  it("holds within the tolerance band around the target", () => {
    for (const value of [9, 10, 11]) {
      const v = autoscaleVerdict({ spec: SPEC, from: 2, reading: at(value, 2), last: undefined, nowMs: T });
      assert.deepEqual(v, { kind: "hold", why: "within-tolerance" }, `value ${value}`);
    }
    const up = autoscaleVerdict({ spec: SPEC, from: 2, reading: at(13, 2), last: undefined, nowMs: T });
    assert.deepEqual(up, { kind: "scale", to: 3, reason: "above-target", proposed: 3, value: 13 });
  });

  it("makes no change that lands as far from the target on the other side", () => {
    // 2 replicas at 12: 3 would read 8 each, 20% below; as far off as now.
    const v = autoscaleVerdict({ spec: SPEC, from: 2, reading: at(12, 2), last: undefined, nowMs: T });
    assert.deepEqual(v, { kind: "hold", why: "overshoot" });
    // 3 at 6: 2 would read 9, within the band: down it goes.
    const w = autoscaleVerdict({ spec: SPEC, from: 3, reading: at(6, 3), last: undefined, nowMs: T });
    assert.deepEqual(w, { kind: "scale", to: 2, reason: "below-target", proposed: 2, value: 6 });
  });

  it("keeps within [min, max] and holds at a bound", () => {
    const high = autoscaleVerdict({ spec: SPEC, from: 2, reading: at(100, 2), last: undefined, nowMs: T });
    assert.deepEqual(high, { kind: "scale", to: 4, reason: "above-target", proposed: 20, value: 100 });
    const atMax = autoscaleVerdict({ spec: SPEC, from: 4, reading: at(100, 4), last: undefined, nowMs: T });
    assert.deepEqual(atMax, { kind: "hold", why: "at-bound" });
    const low = autoscaleVerdict({ spec: SPEC, from: 3, reading: at(0, 3), last: undefined, nowMs: T });
    assert.deepEqual(low, { kind: "scale", to: 1, reason: "below-target", proposed: 0, value: 0 });
    const atMin = autoscaleVerdict({ spec: SPEC, from: 1, reading: at(0, 1), last: undefined, nowMs: T });
    assert.deepEqual(atMin, { kind: "hold", why: "at-bound" });
  });

  it("acts only on load that stayed beyond the band for the whole window", () => {
    const spike = { value: 30, low: 10, high: 30, ready: 2, covered: true };
    assert.deepEqual(autoscaleVerdict({ spec: SPEC, from: 2, reading: spike, last: undefined, nowMs: T }), {
      kind: "hold",
      why: "unsteady",
    });
    const young = { ...at(30, 2), covered: false };
    assert.deepEqual(autoscaleVerdict({ spec: SPEC, from: 2, reading: young, last: undefined, nowMs: T }), {
      kind: "hold",
      why: "unsteady",
    });
    const sustained = { value: 30, low: 20, high: 35, ready: 2, covered: true };
    assert.deepEqual(
      autoscaleVerdict({ spec: SPEC, from: 2, reading: sustained, last: undefined, nowMs: T }),
      {
        kind: "scale",
        to: 4,
        reason: "above-target",
        proposed: 4,
        value: 20,
      },
    );
  });

  it("waits out the cooldowns, the scale-down one longer, from the last decision either way", () => {
    const last = { replicas: 3, lastUpMs: T, lastDownMs: 0, lastSeq: 9, lastExplanation: "" };
    const up = (nowMs: number) =>
      autoscaleVerdict({ spec: SPEC, from: 3, reading: at(20, 3), last, nowMs }).kind;
    const down = (nowMs: number) =>
      autoscaleVerdict({ spec: SPEC, from: 3, reading: at(2, 3), last, nowMs }).kind;
    assert.equal(up(T + 29_999), "hold");
    assert.equal(up(T + 30_000), "scale");
    assert.equal(down(T + 30_000), "hold", "a scale-down waits longer than a scale-up");
    assert.equal(down(T + 119_999), "hold");
    assert.equal(down(T + 120_000), "scale");
    // After a scale-down, a scale-up waits for the up cooldown too: no down/up within it.
    const afterDown = { ...last, lastUpMs: 0, lastDownMs: T };
    assert.equal(
      autoscaleVerdict({ spec: SPEC, from: 3, reading: at(20, 3), last: afterDown, nowMs: T + 10_000 }).kind,
      "hold",
    );
  });

  it("scales down only when every wanted replica is ready, and never against the load's direction", () => {
    const v = autoscaleVerdict({ spec: SPEC, from: 4, reading: at(1, 2), last: undefined, nowMs: T });
    assert.deepEqual(v, { kind: "hold", why: "not-all-ready" });
    // High load on the 1 ready replica of 3 wanted: ceil(1 × 1.5) = 2 < 3, yet no scale-down.
    const w = autoscaleVerdict({ spec: SPEC, from: 3, reading: at(15, 1), last: undefined, nowMs: T });
    assert.deepEqual(w, { kind: "hold", why: "at-bound" });
  });

  it("has nothing to decide without load, or on a metric it does not know", () => {
    assert.deepEqual(
      autoscaleVerdict({ spec: SPEC, from: 2, reading: undefined, last: undefined, nowMs: T }),
      {
        kind: "hold",
        why: "no-load",
      },
    );
    const spec = { ...SPEC, metric: "tokens_per_second" };
    assert.deepEqual(autoscaleVerdict({ spec, from: 2, reading: at(50, 2), last: undefined, nowMs: T }), {
      kind: "hold",
      why: "unknown-metric",
    });
  });
});

describe("autoscale: decide over the fold", () => {
  it("scales up on load, creating the replicas in the same pass, and explains why", () => {
    const f = fleet(2);
    assert.equal(f.replicasOf(MODEL).length, 2);
    assert.deepEqual(kinds(f.step().decisions), [], "no load reported: nothing to decide");
    reportLoad(f, 25);
    assert.deepEqual(kinds(f.step().decisions), [], "load not yet seen for a whole window");
    f.advance(SPEC.stabilizationMs);
    reportLoad(f, 25);
    const out = f.step();
    assert.deepEqual(kinds(out.decisions).slice(0, 3), [
      "autoscaleDecided",
      "replicaCreated",
      "replicaCreated",
    ]);
    const [d] = decided(out);
    assert.deepEqual(
      {
        from: d?.from,
        to: d?.to,
        metric: d?.metric,
        value: d?.value,
        target: d?.target,
        ready: d?.readyReplicas,
      },
      { from: 2, to: 4, metric: "queue_depth", value: 25, target: 10, ready: 2 },
    );
    assert.equal(d?.reason, "above-target");
    assert.equal(
      out.decisions[0]?.explanation,
      "llama-3.1-8b scaled up 2 → 4: queue_depth per ready replica (2 ready) stayed above target 10 ±10% for 15s (lowest 25, now 25); ceil(2 × 25 / 10) = 5 (held to max 4)",
    );
    assert.equal(desired(f), 4, "the fold's desired count follows the decision");
    assert.equal(f.state.replicas.autoscale[MODEL]?.replicas, 4);
  });

  it("scales down only after the longer cooldown, draining the newest replicas", () => {
    const f = fleet(2);
    steadyLoad(f, 25);
    f.obey(f.step());
    f.run();
    assert.equal(f.replicasOf(MODEL).filter((r) => r.phase === "running").length, 4);
    reportLoad(f, 2);
    f.advance(SPEC.upCooldownMs);
    assert.deepEqual(decided(f.step()), [], "within the scale-down cooldown");
    f.advance(SPEC.downCooldownMs - SPEC.upCooldownMs);
    const out = f.step();
    const [d] = decided(out);
    assert.deepEqual([d?.from, d?.to, d?.reason], [4, 1, "below-target"]);
    assert.equal(ofKind(out.decisions, "replicaDrainStarted").length, 3);
    assert.equal(desired(f), 1);
  });

  it("a catalog change of replicas starts again from them; the setting's bounds still hold", () => {
    const f = fleet(2);
    steadyLoad(f, 25);
    f.step();
    assert.equal(desired(f), 4);
    f.catalog(autoscaled(3));
    assert.equal(desired(f), 3, "the operator's count replaces the last decision");
    f.catalog(autoscaled(9));
    assert.equal(desired(f), 4, "held to max");
  });

  it("does not flap under noisy load: few decisions, none reversing within a cooldown", () => {
    const f = fleet(2);
    // Load that hovers around the target with ±30% noise, then a step up, then back down.
    let seed = 7;
    const noise = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return (seed / 2 ** 31) * 0.6 - 0.3;
    };
    const demandAt = (i: number) => (i < 60 ? 20 : i < 120 ? 60 : 20);
    const T0_LOAD_STEP = f.nowMs + 60 * 5_000;
    const history: Array<{ atMs: number; from: number; to: number }> = [];
    for (let i = 0; i < 180; i++) {
      f.advance(5_000);
      const running = f.replicasOf(MODEL).filter((r) => r.phase === "running").length;
      reportLoad(f, () => Math.round((demandAt(i) / Math.max(1, running)) * (1 + noise())));
      const outs = f.run();
      for (const o of outs)
        for (const d of decided(o)) history.push({ atMs: f.nowMs, from: d.from, to: d.to });
    }
    assert.ok(history.length >= 2, `it scaled up and down: ${JSON.stringify(history)}`);
    // ±30% noise around a load 2 replicas hold moves nothing; the step up scales up once, the step down down.
    assert.ok(history.length <= 3, `bounded: ${JSON.stringify(history)}`);
    assert.ok(history[0]!.to > history[0]!.from && history.at(-1)!.to < history.at(-1)!.from);
    assert.ok(history[0]!.atMs >= T0_LOAD_STEP, "nothing before the load stepped up");
    for (let i = 1; i < history.length; i++) {
      const a = history[i - 1]!;
      const b = history[i]!;
      const gap = b.atMs - a.atMs;
      assert.ok(gap >= SPEC.upCooldownMs, `decisions ${gap} ms apart`);
      if (b.to < b.from) assert.ok(gap >= SPEC.downCooldownMs, `a scale-down ${gap} ms after a decision`);
    }
  });

  it("a config's autoscale replaces the catalog's (what-if)", () => {
    const f = fleet(2);
    steadyLoad(f, 25);
    const parsed = reconcilerConfigSchema.parse({
      autoscale: { [MODEL]: { min: 1, max: 8, metric: "queue_depth", target: 5 } },
    });
    const model = f.state.replicas.catalog.models[0]!;
    assert.deepEqual(
      autoscaleOf(parsed, model),
      { ...SPEC, max: 8, target: 5 },
      "the fields the config leaves out keep the catalog's values",
    );
    f.config = parsed;
    const [d] = decided(f.decide());
    assert.deepEqual([d?.from, d?.to], [2, 8]);
    const bad = reconcilerConfigSchema.safeParse({
      autoscale: { [MODEL]: { min: 3, max: 2, metric: "queue_depth", target: 5 } },
    });
    assert.equal(bad.success, false);
    assert.deepEqual(bad.error?.issues[0]?.path, ["autoscale", MODEL, "max"]);
  });

  it("keeps a bounded load history per shard; a full one stands for the whole window", () => {
    const f = fleet(1);
    const r = f.replicasOf(MODEL)[0]!;
    const s = r.shards[0]!;
    for (let i = 0; i < 100; i++) {
      f.advance(250);
      f.load(s.nodeId, [{ shardId: s.shardId, queueDepth: 30 + (i % 2) * 4 }]);
    }
    const samples = f.state.replicas.replicas.get(r.replicaId)?.shards[0]?.load?.samples ?? [];
    assert.equal(samples.length, LOAD_SAMPLES_MAX);
    assert.equal(samples.at(-1)?.atMs, f.nowMs);
    // 48 samples a quarter second apart cover 12 s, less than a 15 s window: still read as steady.
    const load = readLoad(f.state.replicas.replicas.values(), "queue_depth", f.nowMs - 15_000);
    assert.deepEqual(load, { value: 34, low: 30, high: 34, ready: 1, covered: true });
    f.advance(5 * 60_000);
    f.load(s.nodeId, [{ shardId: s.shardId, queueDepth: 2 }]);
    assert.deepEqual(
      f.state.replicas.replicas.get(r.replicaId)?.shards[0]?.load?.samples.map((x) => x.queueDepth),
      [34, 2],
      "older than the history: only the one in force at its start is kept",
    );
  });

  it("folds each shard's load samples from the node's current session only", () => {
    const f = fleet(1);
    const r = f.replicasOf(MODEL)[0]!;
    const s = r.shards[0]!;
    f.load(s.nodeId, [{ shardId: s.shardId, queueDepth: 7, kvCacheUse: 0.4 }]);
    f.load(s.nodeId, [{ shardId: s.shardId, queueDepth: 3, kvCacheUse: 1.5 }]);
    assert.deepEqual(
      {
        q: f.state.replicas.replicas.get(r.replicaId)?.shards[0]?.load?.samples.at(-1)?.queueDepth,
        kv: f.state.replicas.replicas.get(r.replicaId)?.shards[0]?.load?.samples.at(-1)?.kvCacheUse,
      },
      { q: 3, kv: 1 },
      "the newest wins; a share above 1 is held to 1",
    );
    assert.deepEqual(readLoad(f.state.replicas.replicas.values(), "kv_cache_use", f.nowMs), {
      value: 1,
      low: 0.4,
      high: 1,
      ready: 1,
      covered: true,
    });
    f.apply({
      case: "usageChanged",
      value: {
        nodeId: s.nodeId,
        sessionId: "s-old",
        sessionSeq: 5n,
        shardLoad: [{ shardId: s.shardId, queueDepth: 99 }],
      },
    });
    assert.equal(
      f.state.replicas.replicas.get(r.replicaId)?.shards[0]?.load?.samples.at(-1)?.queueDepth,
      3,
      "another session's load is ignored",
    );
  });
});
