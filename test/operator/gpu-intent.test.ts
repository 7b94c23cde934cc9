// biome-ignore-all lint/suspicious/noExplicitAny: response bodies are loosely typed JSON, checked by the assertions
/**
 * Per-GPU operator intent through the real API and the real `llmgw` CLI:
 * clear, cordon and uncordon one GPU; clear a node's untagged problems; and
 * every kind of bad input answered with a 4xx (CLI exit 2) naming the field.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { GpuProblem_Kind } from "../../src/gen/llmgw/v1/agent_pb.js";
import { runCli } from "../support/cli.js";
import { EventFactory } from "../support/fleet-events.js";
import { apiSuite, smallFleet } from "../support/operator-api.js";

describe("GPU clear, cordon and uncordon", () => {
  const api = apiSuite({
    seed: () => {
      const f = new EventFactory("gpu");
      const problems = f.make({
        case: "usageChanged",
        value: {
          nodeId: "gpu-b1",
          sessionId: "s-b1",
          sessionSeq: 9n,
          newProblems: ["NVLink down"],
          gpuProblems: [{ gpuIndex: 5, kind: GpuProblem_Kind.ECC, message: "uncorrectable ECC errors" }],
        },
      });
      return [...smallFleet(), problems];
    },
  });

  const post = (path: string, body: unknown = {}) =>
    api.fx.call(path, {
      method: "POST",
      body: JSON.stringify(body),
      headers: { "content-type": "application/json" },
    });

  it("the node view shows a GPU's reported problem with its kind; the API clears it", async () => {
    const before = (await api.fx.call("/v1/nodes/gpu-b1")).body.node;
    assert.deepEqual(before.gpus[5].faults, [{ kind: "ecc", message: "uncorrectable ECC errors" }]);
    assert.deepEqual(before.nodeProblems, ["NVLink down"]);
    const r = await post("/v1/nodes/gpu-b1/gpus/5/clear", { reason: "reseated" });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.node.gpus[5].faults, []);
    assert.deepEqual(r.body.node.nodeProblems, ["NVLink down"], "only that GPU's problems");
    const n = await post("/v1/nodes/gpu-b1/problems/clear");
    assert.equal(n.status, 200);
    assert.deepEqual(n.body.node.nodeProblems, []);
    const ev = (await api.fx.call("/v1/events?subject=operator.gpu-b1")).body.events;
    assert.deepEqual(
      ev.map((e: any) => e.event.gpuProblemsCleared),
      [
        { nodeId: "gpu-b1", gpuIndex: 5, operator: "admin", reason: "reseated" },
        { nodeId: "gpu-b1", operator: "admin", nodeLevel: true },
      ],
    );
  });

  it("llmgw cordon --gpu / uncordon --gpu / gpu clear write intent the node views show", async () => {
    const c = await runCli(["cordon", "gpu-a2", "--gpu", "2", "--reason", "fan"], { env: api.cliEnv });
    assert.equal(c.code, 0, c.stderr);
    assert.match(c.stdout, /^gpu-a2 GPU 2 cordoned \(log sequence \d+\)\n$/);
    const nodes = await runCli(["nodes"], { env: api.cliEnv });
    assert.match(nodes.stdout, /^gpu-a2\s+-\s+connected\s+8\/8\s+-\s+1\s+-\s+gpu2 cordoned$/m);
    const view = (await api.fx.call("/v1/nodes/gpu-a2")).body.node;
    assert.deepEqual([view.gpus[2].cordoned, view.gpus[2].cordonReason], [true, "fan"]);
    const u = await runCli(["uncordon", "gpu-a2", "--gpu", "2", "--json"], { env: api.cliEnv });
    assert.equal(u.code, 0, u.stderr);
    assert.equal(JSON.parse(u.stdout).node.gpus[2].cordoned, false);
    const g = await runCli(["gpu", "clear", "gpu-a2", "4", "--reason", "swapped"], { env: api.cliEnv });
    assert.equal(g.code, 0, g.stderr);
    assert.match(g.stdout, /^gpu-a2 GPU 4 problems cleared \(log sequence \d+\)\n$/);
    const k = await runCli(["gpu", "clear", "gpu-a2", "node"], { env: api.cliEnv });
    assert.equal(k.code, 0, k.stderr);
    const ev = (await api.fx.call("/v1/events?subject=operator.gpu-a2")).body.events;
    assert.deepEqual(
      ev.map((e: any) => Object.keys(e.event).at(-1)),
      ["gpuCordoned", "gpuUncordoned", "gpuProblemsCleared", "gpuProblemsCleared"],
    );
  });

  it("bad input: 400 for a non-integer index or unknown field, 404 for an unknown node or GPU", async () => {
    const cases: Array<[string, unknown, number, RegExp]> = [
      ["/v1/nodes/gpu-b1/gpus/abc/clear", {}, 400, /gpu index "abc" must be a whole number/],
      ["/v1/nodes/gpu-b1/gpus/-1/cordon", {}, 400, /gpu index "-1" must be a whole number/],
      ["/v1/nodes/gpu-b1/gpus/1.5/uncordon", {}, 400, /gpu index "1.5" must be a whole number/],
      [
        "/v1/nodes/gpu-b1/gpus/8/clear",
        {},
        404,
        /GPU 8 of node gpu-b1 .*gpu index must be one the node registered: 0, 1/,
      ],
      ["/v1/nodes/gpu-zz/gpus/0/cordon", {}, 404, /node gpu-zz not found/],
      ["/v1/nodes/GPU-B1/gpus/0/cordon", {}, 400, /node id/],
      ["/v1/nodes/gpu-b1/gpus/0/cordon", { reason: "x".repeat(501) }, 400, /reason: must be at most 500/],
      ["/v1/nodes/gpu-b1/gpus/0/cordon", { bogus: 1 }, 400, /unknown "bogus"/],
      ["/v1/nodes/gpu-zz/problems/clear", {}, 404, /node gpu-zz not found/],
    ];
    const seq = api.fx.api.runtime.state.seq;
    for (const [path, body, status, message] of cases) {
      const r = await post(path, body);
      assert.equal(r.status, status, `${path}: ${JSON.stringify(r.body)}`);
      assert.match(r.body.error.message, message, path);
    }
    assert.equal(api.fx.api.runtime.state.seq, seq, "nothing appended");
    const [badFlag, badArg, noGpu, drainGpu] = await Promise.all([
      runCli(["cordon", "gpu-b1", "--gpu", "x"], { env: api.cliEnv }),
      runCli(["gpu", "clear", "gpu-b1", "first"], { env: api.cliEnv }),
      runCli(["gpu", "clear", "gpu-b1", "99"], { env: api.cliEnv }),
      runCli(["drain", "gpu-b1", "--gpu", "1"], { env: api.cliEnv }),
    ]);
    assert.equal(badFlag.code, 2);
    assert.equal(badFlag.stderr, 'llmgw: --gpu "x" must be a whole number ≥ 0\n');
    assert.equal(badArg.code, 2);
    assert.equal(badArg.stderr, 'llmgw: gpu "first" must be a whole number ≥ 0\n');
    assert.equal(noGpu.code, 2);
    assert.match(noGpu.stderr, /GPU 99 of node gpu-b1/);
    assert.equal(drainGpu.code, 2, "a drain is of a node, not a GPU");
    assert.match(drainGpu.stderr, /unknown option '--gpu'/);
  });
});
