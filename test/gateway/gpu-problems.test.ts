/**
 * Heartbeats that name a GPU's problem, on a real gateway and a real
 * stream: each distinct problem is recorded once per session, however often
 * the agent repeats it; a problem naming a GPU the node did not register is
 * dropped (the session stays); an oversized one is cut to the gateway's
 * cap with a marker saying so, and the session stays.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { GpuProblem_Kind, ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { codeOf, TestAgent } from "../support/agent.js";
import { waitForLog } from "../support/gateway.js";
import { h100Registration } from "../support/sample-events.js";
import { gatewaySuite } from "../support/suites.js";

describe("gateway: per-GPU problems in heartbeats", () => {
  const env = gatewaySuite("GWGPU");

  /** The node's usage events, once its session closed (a problem may wait for the close). */
  const usageOf = async (node: string) =>
    (
      await waitForLog(
        env.log,
        (rs) => rs.some((r) => r.event.body.case === "sessionClosed" && r.event.body.value.nodeId === node),
        `the session-closed event of ${node}`,
      )
    ).flatMap((r) =>
      r.event.body.case === "usageChanged" && r.event.body.value.nodeId === node ? [r.event.body.value] : [],
    );

  it("records each distinct problem once, and drops one naming a GPU the node does not have", async () => {
    const node = "gpu-xid";
    const a = await TestAgent.connect({ baseUrl: env.gw.url, registration: h100Registration(node) });
    try {
      const xid = { gpuIndex: 3, kind: GpuProblem_Kind.XID, message: "Xid 79: GPU has fallen off the bus" };
      const hot = { gpuIndex: 3, kind: GpuProblem_Kind.THERMAL, message: "92 C" };
      for (let i = 0; i < 20; i++) a.heartbeat({ gpuProblems: [xid, xid] });
      a.heartbeat({ gpuProblems: [{ gpuIndex: 12, kind: GpuProblem_Kind.ECC, message: "no such GPU" }] });
      a.heartbeat({ gpuProblems: [xid, hot] });
      const last = a.shardStatus({ shardId: "s1", state: ShardStatus_State.RUNNING });
      await a.waitForAck(last);
      assert.equal(a.done, false, "the session stays open");
    } finally {
      a.abort();
    }
    const usage = await usageOf(node);
    assert.deepEqual(
      usage.map((u) => u.gpuProblems.map((p) => [p.gpuIndex, p.kind, p.message])),
      [
        [[3, GpuProblem_Kind.XID, "Xid 79: GPU has fallen off the bus"]],
        [[3, GpuProblem_Kind.THERMAL, "92 C"]],
      ],
    );
  });

  it("cuts a GPU problem message that is too long to the cap, with a marker, and keeps the session", async () => {
    const node = "gpu-chatty";
    const a = await TestAgent.connect({ baseUrl: env.gw.url, registration: h100Registration(node) });
    try {
      a.heartbeat({ gpuProblems: [{ gpuIndex: 0, kind: GpuProblem_Kind.OTHER, message: "x".repeat(2000) }] });
      const last = a.shardStatus({ shardId: "s1", state: ShardStatus_State.RUNNING });
      await a.waitForAck(last);
      assert.equal(a.done, false, "the session stays open");
      assert.equal(codeOf(await a.close()), "OK");
    } finally {
      a.abort();
    }
    const [usage] = await usageOf(node);
    const message = usage?.gpuProblems[0]?.message ?? "";
    assert.equal(message.length, 1024, "cut to the default cap of 1024 characters");
    assert.match(message, /^x+…\[truncated by the gateway: 2000 characters\]$/);
  });
});
