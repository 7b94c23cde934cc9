import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { jserrors } from "@nats-io/jetstream/internal";
import {
  heartbeatProblem,
  LIMITS,
  registrationProblem,
} from "../../src/gateway/session-core/registration.js";
import {
  knows,
  REMEMBERED_PROBLEMS,
  remembered,
  usageBaseline,
} from "../../src/gateway/session-core/usage.js";
import { HeartbeatSchema, RegisterSchema } from "../../src/gen/llmgw/v1/agent_pb.js";
import { logErrorFrom } from "../../src/log/index.js";
import type { RegisterInit } from "../support/agent.js";
import { h100Registration } from "../support/sample-events.js";

const reg = (init: RegisterInit) => create(RegisterSchema, init);

describe("registration rules (pure)", () => {
  it("takes a real registration, an empty one, and a shard on a GPU the node no longer lists", () => {
    assert.equal(registrationProblem(reg(h100Registration("gpu-a1"))), undefined);
    assert.equal(registrationProblem(reg({ nodeId: "gpu-a1" })), undefined);
    const lost = h100Registration("gpu-a1", [{ shard: "s1", replica: "r1", gpus: [6, 7] }]);
    lost.gpus = lost.gpus.slice(0, 7);
    assert.equal(registrationProblem(reg(lost)), undefined);
  });

  it("names the first field that contradicts itself", () => {
    const dupGpu = h100Registration("gpu-a1");
    dupGpu.gpus[5] = { ...dupGpu.gpus[5]!, index: 0 };
    assert.equal(
      registrationProblem(reg(dupGpu)),
      "gpus[5].index: GPU index 0 is listed twice (also gpus[0])",
    );
    const dupShard = h100Registration("gpu-a1", [
      { shard: "s1", replica: "r1", gpus: [0] },
      { shard: "s2", replica: "r1", gpus: [1] },
      { shard: "s1", replica: "r2", gpus: [2] },
    ]);
    assert.equal(
      registrationProblem(reg(dupShard)),
      'running_shards[2].shard_id: shard "s1" is listed twice (also running_shards[0])',
    );
    const dupIndex = h100Registration("gpu-a1", [{ shard: "s1", replica: "r1", gpus: [0, 1, 0] }]);
    assert.equal(
      registrationProblem(reg(dupIndex)),
      "running_shards[0].gpu_indices[2]: GPU 0 is listed twice",
    );
    const fabric = h100Registration("gpu-a1");
    fabric.fabrics[1] = { ...fabric.fabrics[1]!, gpuIndices: [3, 3] };
    assert.equal(registrationProblem(reg(fabric)), "fabrics[1].gpu_indices[1]: GPU 3 is listed twice");
  });

  it("takes an advertise_address that is empty, a DNS name or an IP address, and refuses anything else naming the field", () => {
    for (const ok of [
      "",
      "10.0.0.5",
      "255.255.255.255",
      "gpu-1.dc1.example.com",
      "gpu-1",
      "fd00::5",
      "::1",
      "2001:db8:0:0:0:0:2:1",
      "::ffff:10.0.0.5",
    ]) {
      assert.equal(registrationProblem(reg({ nodeId: "gpu-a1", advertiseAddress: ok })), undefined, ok);
    }
    for (const bad of [
      "10.0.0.256",
      "10.0.0",
      "010.0.0.5",
      "GPU-1.example.com",
      "gpu_1",
      "gpu-1:8000",
      "http://gpu-1",
      "[fd00::5]",
      "fe80::1%eth0",
      "fd00::5::6",
      "a b",
      "-gpu",
      `${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(62)}`,
    ]) {
      assert.match(
        registrationProblem(reg({ nodeId: "gpu-a1", advertiseAddress: bad })) ?? "",
        /^advertise_address .*must be empty, a DNS name \(RFC 1123.*or an IPv4 or IPv6 address, at most 253 characters$/,
        bad,
      );
    }
  });

  it("bounds every repeated field", () => {
    const n = LIMITS.gpus + 1;
    assert.match(
      registrationProblem(reg({ nodeId: "a", gpus: Array.from({ length: n }, (_, i) => ({ index: i })) })) ??
        "",
      /^gpus lists 257 entries; at most 256/,
    );
    assert.match(
      registrationProblem(
        reg({
          nodeId: "a",
          runningShards: Array.from({ length: LIMITS.runningShards + 1 }, (_, i) => ({ shardId: `s${i}` })),
        }),
      ) ?? "",
      /^running_shards lists 1025 entries/,
    );
    // A long problem text is not refused: the session core cuts it to its cap with a marker.
    assert.equal(
      registrationProblem(reg({ nodeId: "a", gpus: [{ index: 0, problems: ["x".repeat(2000)] }] })),
      undefined,
    );
    assert.equal(heartbeatProblem(create(HeartbeatSchema, { newProblems: ["Xid 79"] })), undefined);
    assert.match(
      heartbeatProblem(create(HeartbeatSchema, { gpuMemoryUsedMb: Array.from({ length: n }, () => 1n) })) ??
        "",
      /^heartbeat\.gpu_memory_used_mb lists 257 GPUs/,
    );
  });
});

describe("usage baseline: bounded memory under a flood of new problems", () => {
  it("remembers each problem reported and forgets the oldest past its bound, never changing an earlier baseline", () => {
    const first = usageBaseline(1024, reg(h100Registration("gpu-a1")));
    let b = first;
    let fresh = 0;
    for (let i = 0; i < REMEMBERED_PROBLEMS * 3; i++) {
      if (!knows(b, `Xid ${i}`)) fresh++;
      b = remembered(b, [`Xid ${i}`]);
      assert.ok(b.problems.size <= REMEMBERED_PROBLEMS);
      assert.ok(
        b.problems.segments.every((s) => s.size <= 256),
        "only small segments are ever copied",
      );
    }
    assert.equal(fresh, REMEMBERED_PROBLEMS * 3, "every problem not yet reported is new");
    // A recent problem is still known; the oldest was forgotten and counts as new again.
    assert.equal(knows(b, `Xid ${REMEMBERED_PROBLEMS * 3 - 1}`), true);
    assert.equal(knows(b, "Xid 0"), false);
    assert.equal(knows(first, "Xid 1"), false, "the first baseline is as it was");
  });
});

describe("log errors the gateway retries", () => {
  it("takes a publish that met no responders (reported as 'jetstream is not enabled') as unavailable", () => {
    // The client's JetStreamNotEnabled, exported by its "internal" entry point only.
    const notEnabled = new jserrors.JetStreamNotEnabled("jetstream is not enabled");
    assert.equal(logErrorFrom(notEnabled, "appending").code, "unavailable");
  });
});
