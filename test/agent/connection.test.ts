/**
 * The agent protocol's client (shared by the simulator and the node agent)
 * over real Connect streams: gateways tried in order, Reconnect's wait
 * honoured, and what a stream did not get acknowledged said again on the
 * next stream, in order — into the real log through a real gateway.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  AgentConnection,
  type ConnectionEvent,
  type ConnectionOptions,
} from "../../src/agent/client/index.js";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { deadUrl, FakeGateway, waitFor } from "../support/fake-gateway.js";
import { readAll } from "../support/gateway.js";
import { h100Registration } from "../support/sample-events.js";
import { gatewaySuite } from "../support/suites.js";

function connection(
  nodeId: string,
  gateways: string[],
  events: ConnectionEvent[],
  more: Partial<ConnectionOptions> = {},
): AgentConnection {
  return new AgentConnection({
    gateways,
    protocol: "connect",
    tls: () => undefined,
    ackTimeoutMs: 5000,
    heartbeatMs: 60_000,
    reconnectMinMs: 50,
    reconnectMaxMs: 200,
    random: () => 0.5,
    registration: () => h100Registration(nodeId),
    heartbeat: () => undefined,
    onControl: () => {},
    onEvent: (e) => events.push(e),
    resendUnacked: true,
    ...more,
  });
}

const status = (shardId: string, state: ShardStatus_State) => ({
  msg: { case: "shard" as const, value: { shardId, replicaId: `r-${shardId}`, state } },
});

describe("agent client: the stream to the gateways", () => {
  const env = gatewaySuite("AGCONN");

  it("tries the gateways in order: a dead first one, then the next registers", async () => {
    const fake = await FakeGateway.start();
    const dead = await deadUrl();
    const events: ConnectionEvent[] = [];
    const c = connection("gpu-order", [dead.url, fake.url], events);
    try {
      c.start();
      await waitFor("registration on the second gateway", () => c.connected);
      const tried = events.flatMap((e) => (e.type === "connecting" ? [e.url] : []));
      assert.equal(tried[0], dead.url, "the first gateway was tried first");
      assert.equal(tried.at(-1), fake.url);
      assert.equal(fake.latest("gpu-order")?.register?.cumulativeAcks, true);
    } finally {
      await c.stop();
      await fake.close();
      await dead.close();
    }
  });

  it("honours Reconnect's retry_after_ms and moves to the next gateway", async () => {
    const a = await FakeGateway.start();
    const b = await FakeGateway.start();
    const events: ConnectionEvent[] = [];
    const c = connection("gpu-reconnect", [a.url, b.url], events);
    try {
      c.start();
      await waitFor("registration on the first gateway", () => a.latest("gpu-reconnect")?.register);
      await waitFor("connected", () => c.connected);
      const asked = Date.now();
      a.latest("gpu-reconnect")!.send({
        msg: { case: "reconnect", value: { reason: "draining", retryAfterMs: 1500 } },
      });
      await waitFor("registration on the second gateway", () => b.latest("gpu-reconnect")?.register);
      const waited = Date.now() - asked;
      assert.ok(waited >= 1400, `reconnected after ${waited} ms although the gateway asked for 1500`);
      const d = events.find((e) => e.type === "disconnected");
      assert.equal(d?.type === "disconnected" && d.retryAfterMs, 1500);
      assert.ok(d?.type === "disconnected" && d.nextAttemptMs >= 1500);
    } finally {
      await c.stop();
      await a.close();
      await b.close();
    }
  });

  it("says again, in order, what a stream did not acknowledge; a superseded status is not repeated", async () => {
    // The fake gateway acknowledges the registration and nothing else.
    const fake = await FakeGateway.start();
    const events: ConnectionEvent[] = [];
    const node = "gpu-resend";
    const c = connection(node, [fake.url, env.gw.url], events);
    try {
      c.start();
      await waitFor("registration on the fake gateway", () => c.connected);
      assert.equal(c.send(status("s1", ShardStatus_State.STARTING)), true);
      c.send({ msg: { case: "result", value: { commandId: "c1", ok: true } } });
      c.send(status("s1", ShardStatus_State.RUNNING));
      c.send(status("s2", ShardStatus_State.STARTING));
      await waitFor("the fake gateway got 4 messages", () => fake.latest(node)!.messages.length === 4);
      assert.equal(c.unacknowledged, 3, "s1 STARTING is superseded by s1 RUNNING");
      fake.latest(node)!.close();
      await waitFor(
        "everything acknowledged by the real gateway",
        () => c.connected && c.unacknowledged === 0,
      );
      assert.deepEqual(
        events.filter((e) => e.type === "resent"),
        [{ type: "resent", count: 3 }],
      );
    } finally {
      await c.stop();
      await fake.close();
    }
    const stored = (await readAll(env.log)).flatMap((r) => {
      const b = r.event.body;
      if (b.case === "shardStatus" && b.value.nodeId === node)
        return [`${b.value.status?.shardId}:${ShardStatus_State[b.value.status?.state ?? 0]}`];
      if (b.case === "commandResult" && b.value.nodeId === node)
        return [`result:${b.value.result?.commandId}`];
      return [];
    });
    assert.deepEqual(stored, ["result:c1", "s1:RUNNING", "s2:STARTING"]);
  });

  it("keeps what is said while disconnected and says it once registered", async () => {
    const events: ConnectionEvent[] = [];
    const node = "gpu-offline";
    const c = connection(node, [env.gw.url], events);
    try {
      assert.equal(c.send(status("s9", ShardStatus_State.FAILED)), false, "not connected: not sent now");
      c.start();
      await waitFor("acknowledged after registering", () => c.connected && c.unacknowledged === 0);
    } finally {
      await c.stop();
    }
    const stored = (await readAll(env.log)).filter(
      (r) => r.event.body.case === "shardStatus" && r.event.body.value.nodeId === node,
    );
    assert.equal(stored.length, 1);
  });
});
