/**
 * Simulated load: curves parsed and evaluated (pure), and what running
 * shards report in their heartbeats over a real Connect stream: the model's
 * demand split over its running replicas, the queue on rank 0.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import {
  demandAt,
  type LoadSpec,
  parseLoadSpec,
  SimConfigError,
  SimFleet,
  shardLoadAt,
} from "../../src/sim/index.js";
import { waitFor } from "../support/fake-gateway.js";
import { FAST, heartbeats, registered, statuses, withFleet } from "../support/sim.js";

const spec = (text: string): LoadSpec => {
  const s = parseLoadSpec(text);
  if (typeof s === "string") throw new Error(s);
  return s;
};

describe("simulated load curves", () => {
  it("parses and evaluates const, steps, ramp and sine", () => {
    assert.equal(demandAt(spec("m=const:12").curve, 5_000), 12);
    const steps = spec("m=steps:5@0s/25@1m/3@5m").curve;
    assert.deepEqual(
      [0, 59_999, 60_000, 299_999, 300_000, 1e9].map((t) => demandAt(steps, t)),
      [5, 5, 25, 25, 3, 3],
    );
    const ramp = spec("m=ramp:2@10s/40@20s").curve;
    assert.deepEqual(
      [0, 10_000, 15_000, 20_000, 60_000].map((t) => demandAt(ramp, t)),
      [2, 2, 21, 40, 40],
    );
    const sine = spec("m=sine:20~15@2m").curve;
    assert.equal(demandAt(sine, 30_000), 35);
    assert.equal(Math.round(demandAt(sine, 90_000)), 5);
    assert.equal(demandAt(spec("m=sine:5~15@2m").curve, 90_000), 0, "never below 0");
    assert.equal(spec("chat=ramp:2@0s/40@1m+noise=0.2").noise, 0.2);
  });

  it("refuses a malformed curve saying what to write; the config names --load", () => {
    for (const [text, why] of [
      ["m", /not MODEL=CURVE/],
      ["m=linear:3", /the curve is const:V/],
      ["m=steps:5@0s/4@0s", /times must increase/],
      ["m=steps:5@soon", /VALUE@TIME/],
      ["m=sine:20@2m", /BASE~AMPLITUDE@PERIOD/],
      ["m=const:3+noise=2", /noise must be a number from 0 to 1/],
    ] as const)
      assert.match(String(parseLoadSpec(text)), why, text);
    assert.throws(
      () => new SimFleet({ ...FAST, load: ["m=const:1", "m=const:2"] }),
      (err: unknown) =>
        err instanceof SimConfigError &&
        err.issues.some((i) => i.field === "load" && /two load curves/.test(i.message)),
    );
  });

  it("splits the demand over running replicas with seeded noise: same seed, same readings", () => {
    const s = spec("m=const:30+noise=0.2");
    const at = (replicaId: string, rank: number, replicas: number, seed = 1) =>
      shardLoadAt(s, { seed, tMs: 12_345, periodMs: 1000, replicaId, rank, replicas, slots: 32 });
    const a = at("r-1", 0, 3);
    assert.deepEqual(at("r-1", 0, 3), a, "deterministic");
    assert.ok(a.queueDepth >= 8 && a.queueDepth <= 12, `10 ± 20%: ${a.queueDepth}`);
    assert.ok(Math.abs(a.kvCacheUse - a.queueDepth / 32) < 1 / 32 + 1e-9);
    assert.equal(at("r-1", 1, 3).queueDepth, 0, "the queue is on rank 0");
    assert.equal(at("r-1", 1, 3).kvCacheUse, a.kvCacheUse, "every rank holds the KV cache");
    const seeds = new Set([1, 2, 3, 4, 5, 6].map((seed) => at("r-1", 0, 1, seed).queueDepth));
    assert.ok(seeds.size > 1, "another seed, other noise");
  });

  it("running shards report their model's load in heartbeats", () =>
    withFleet({ nodes: 1, load: ["llama=const:20"] }, async (_fleet, gw) => {
      const s = await registered(gw, "node-1");
      for (const [shardId, replicaId, gpu] of [
        ["sh-1", "llama-1", 0],
        ["sh-2", "llama-2", 1],
      ] as const)
        gw.command("node-1", {
          case: "start",
          value: { shardId, replicaId, model: "llama", profile: "tp1", gpuIndices: [gpu], worldSize: 1 },
        });
      gw.command("node-1", {
        case: "start",
        value: {
          shardId: "sh-3",
          replicaId: "other-1",
          model: "other",
          profile: "tp1",
          gpuIndices: [2],
          worldSize: 1,
        },
      });
      await waitFor("three running", () =>
        ["sh-1", "sh-2", "sh-3"].every((id) => statuses(s, id).some((x) => x.state === State.RUNNING)),
      );
      const from = s.messages.length;
      const hb = await waitFor("a heartbeat with both replicas' load", () =>
        // The agent reads each engine's metrics every interval: a heartbeat may carry a reading from before both ran.
        heartbeats(s, from).find(
          (h) => h.shardLoad.filter((l) => l.shardId !== "sh-3" && l.queueDepth === 10).length === 2,
        ),
      );
      // Read by the real agent from each engine's metrics page (vLLM's names).
      assert.deepEqual(
        hb.shardLoad.map((l) => [l.shardId, l.queueDepth, l.kvCacheUse]).sort(),
        [
          ["sh-1", 10, 10 / 32],
          ["sh-2", 10, 10 / 32],
          ["sh-3", 0, 0],
        ],
        "20 split over 2 running replicas; the engine of a model without a curve is idle",
      );
    }));
});
