/**
 * A pass is one log message, and the NATS server refuses a message over its
 * max_payload: decide cuts a pass at maxPassBytes as it cuts it at
 * maxDecisionsPerPass, and what it leaves follows in the next passes.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, toBinary } from "@bufbuild/protobuf";
import { newEvent } from "../../src/codec/index.js";
import { EventSchema, ReconcilePassSchema, Writer_Kind } from "../../src/gen/llmgw/v1/events_pb.js";
import {
  DEFAULT_RECONCILER_CONFIG,
  type DecideOutput,
  fitPassBytes,
  PASS_HEADROOM_BYTES,
  type ReconcilerConfig,
  reconcilerConfigSchema,
} from "../../src/reconciler/index.js";
import { passBody } from "../../src/reconciler/runner/pass-body.js";
import { Fleet, model, ofKind } from "../support/fleet.js";

const MIB = 1024 * 1024;

/** A 405B model on 4 nodes per replica, with the engine arguments and environment a real profile carries. */
function tp8pp4(replicas: number) {
  const m = model("llama-3.1-405b-instruct", replicas, {
    name: "tp8-pp4",
    shards: 4,
    gpus: 8,
    memGb: 72,
    fabric: "infiniband",
  });
  const profiles = m.profiles.map((p) => ({
    ...p,
    engineArgs: [
      "--tensor-parallel-size",
      "8",
      "--pipeline-parallel-size",
      "4",
      "--max-model-len",
      "131072",
      "--gpu-memory-utilization",
      "0.92",
      "--enable-prefix-caching",
      "--max-num-seqs",
      "256",
      "--kv-cache-dtype",
      "fp8",
    ],
    engineEnv: { VLLM_USE_V1: "1", NCCL_IB_HCA: "mlx5", VLLM_ATTENTION_BACKEND: "FLASHINFER" },
  }));
  return { ...m, profiles };
}

/** `nodes` empty 8-GPU nodes, every session adopted: the next pass creates and places. */
function fleetOf(nodes: number, config: Partial<ReconcilerConfig>): Fleet {
  const f = new Fleet(config);
  for (let i = 0; i < nodes; i++) f.connect(`gpu-${String(i).padStart(5, "0")}`);
  while (f.step().truncated);
  return f;
}

/** The bytes decide limits: the pass's decisions and commands as ReconcilePass encodes them. */
function limitedBytes(out: DecideOutput): number {
  const body = create(ReconcilePassSchema, { decisions: out.decisions, commands: out.commands });
  return toBinary(ReconcilePassSchema, body).length;
}

/** The whole message, encoded as the runner appends it. */
function eventBytes(out: DecideOutput, f: Fleet): number {
  const ev = newEvent({
    id: "pass-00000000-0000-4000-8000-000000000000",
    timeUnixMs: BigInt(f.nowMs),
    writer: { kind: Writer_Kind.RECONCILER, id: "reconciler-eu-west-1a" },
    body: {
      case: "reconcilePass",
      value: passBody(out, {
        leaderId: "reconciler-eu-west-1a",
        leaseRevision: 123_456,
        observedSeq: f.state.seq,
        nowMs: f.nowMs,
        trigger: "truncated",
      }),
    },
  });
  return toBinary(EventSchema, ev).length;
}

/** Passes until one decides nothing, each folded; none is obeyed (the shards stay starting). */
function passesToSettle(f: Fleet, max: number): DecideOutput[] {
  const outs: DecideOutput[] = [];
  for (let i = 0; i < max; i++) {
    const out = f.step();
    if (out.decisions.length === 0 && out.commands.length === 0) return outs;
    outs.push(out);
  }
  throw new Error(`no convergence after ${max} passes`);
}

const placements = (outs: DecideOutput[]) =>
  outs.flatMap((o) =>
    ofKind(o.decisions, "replicaPlaced").map((p) => ({
      replica: p.replicaId,
      nodes: p.shards.map((s) => s.nodeId),
    })),
  );

describe("decide: the pass's byte limit", () => {
  it("cuts a placement at maxPassBytes; the rest follows in the next passes, every pass under the limit, nothing lost", () => {
    const limit = 8 * 1024;
    const whole = fleetOf(40, { maxPassBytes: Number.MAX_SAFE_INTEGER });
    whole.catalog(tp8pp4(10));
    const wholePasses = passesToSettle(whole, 5);
    assert.equal(placements(wholePasses).length, 10);
    assert.ok(
      wholePasses.some((o) => limitedBytes(o) > limit),
      "without the limit, one pass is over it",
    );

    const f = fleetOf(40, { maxPassBytes: limit });
    f.catalog(tp8pp4(10));
    const outs = passesToSettle(f, 20);
    for (const [i, o] of outs.entries()) {
      assert.ok(limitedBytes(o) <= limit, `pass ${i}: ${limitedBytes(o)} bytes over ${limit}`);
      assert.equal(o.truncated, i < outs.length - 1, `pass ${i}: only the last is not truncated`);
      // Each placement carries its own starts: a unit is never split.
      assert.equal(o.commands.length, 4 * ofKind(o.decisions, "replicaPlaced").length);
    }
    assert.ok(outs.length >= 4, `${outs.length} passes: 10 placements of about 2.7 KB each in 8 KiB`);
    // The same placements, in the same order, as the one uncut pass made.
    assert.deepEqual(placements(outs), placements(wholePasses));
    assert.equal(f.replicasOf("llama-3.1-405b-instruct").length, 10);
    for (const r of f.replicasOf("llama-3.1-405b-instruct")) assert.equal(r.shards.length, 4, r.replicaId);
  });

  it("accepts a unit alone in an empty pass whatever the limit: a pass always makes progress", () => {
    const f = fleetOf(8, { maxPassBytes: 1 });
    f.catalog(tp8pp4(2));
    const outs = passesToSettle(f, 10);
    // Two creations, then two placements: one unit per pass (the second
    // creation's pass refuses the first placement: it is truncated too).
    assert.deepEqual(
      outs.map((o) => [o.decisions.map((d) => d.kind.case), o.commands.length, o.truncated]),
      [
        [["replicaCreated"], 0, true],
        [["replicaCreated"], 0, true],
        [["replicaPlaced"], 4, true],
        [["replicaPlaced"], 4, false],
      ],
    );
  });

  it("with the defaults, 500 tp8-pp4 replicas on 2,200 nodes are placed in passes the NATS server takes", () => {
    // The fleet where a single pass of 500 placements encoded to about 1.4 MB:
    // over the server's 1 MiB max_payload, appended never, decided forever.
    const f = fleetOf(2_200, {});
    f.catalog(tp8pp4(500));
    const outs = passesToSettle(f, 10);
    for (const [i, o] of outs.entries()) {
      assert.ok(limitedBytes(o) <= DEFAULT_RECONCILER_CONFIG.maxPassBytes, `pass ${i}`);
      assert.ok(eventBytes(o, f) <= MIB - PASS_HEADROOM_BYTES, `pass ${i}: ${eventBytes(o, f)} bytes`);
    }
    const placed = placements(outs);
    assert.equal(placed.length, 500);
    assert.equal(new Set(placed.map((p) => p.replica)).size, 500);
    assert.ok(outs.filter((o) => ofKind(o.decisions, "replicaPlaced").length > 0).length >= 2);
  });
});

describe("config: maxPassBytes", () => {
  it("defaults to 768 KiB, and a config below 4 KiB is refused naming the field", () => {
    assert.equal(reconcilerConfigSchema.parse({}).maxPassBytes, 768 * 1024);
    assert.equal(reconcilerConfigSchema.parse({ maxPassBytes: 65_536 }).maxPassBytes, 65_536);
    const bad = reconcilerConfigSchema.safeParse({ maxPassBytes: 100 });
    assert.equal(bad.success, false);
    assert.deepEqual(
      bad.error?.issues.map((i) => i.path.join(".")),
      ["maxPassBytes"],
    );
  });

  it("is lowered to a server's max_payload less the headroom, and left alone when it fits or is unknown", () => {
    const config = reconcilerConfigSchema.parse({});
    assert.deepEqual(fitPassBytes(config, 65_536), {
      config: { ...config, maxPassBytes: 65_536 - PASS_HEADROOM_BYTES },
      lowered: { from: 768 * 1024, to: 65_536 - PASS_HEADROOM_BYTES },
    });
    assert.deepEqual(fitPassBytes(config, MIB), { config, lowered: null });
    assert.deepEqual(fitPassBytes(config, undefined), { config, lowered: null });
  });
});
