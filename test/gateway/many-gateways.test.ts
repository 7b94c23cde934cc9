import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Gateway } from "../../src/gateway/index.js";
import { SessionClosed_Reason } from "../../src/gen/llmgw/v1/events_pb.js";
import { codeOf, TestAgent } from "../support/agent.js";
import { testPass } from "../support/fleet-events.js";
import { rand, readAll, startTestGateway, waitForLog, waitUntil } from "../support/gateway.js";
import { h100Registration } from "../support/sample-events.js";
import { openTestLog, serverSuite } from "../support/suites.js";

function stopPass(id: string, commands: Array<{ commandId: string; nodeId: string; sessionId: string }>) {
  return testPass(id, {
    commands: commands.map((c) => ({
      ...c,
      attempt: 1,
      action: { case: "stop" as const, value: { shardId: `${c.commandId}-shard` } },
    })),
  });
}

describe("gateway: newest session wins across gateways", () => {
  const env = serverSuite();

  it("moves an agent from gateway A to B: A aborts naming B, commands reach only B's session", async () => {
    const { log, stream, prefix } = await openTestLog(env.server.url, "GWMANY");
    const leaseBucket = `leases_${rand()}`;

    const gws: Gateway[] = [];
    const agents: TestAgent[] = [];
    try {
      const common = { nats: env.server.url, stream, prefix, certs: env.certs, leaseBucket };
      const a = await startTestGateway({ ...common, id: "gw-a" });
      gws.push(a);
      const b = await startTestGateway({ ...common, id: "gw-b" });
      gws.push(b);
      const node = "gpu-move-1";
      const tls = env.tls(node);
      const onA = await TestAgent.connect({ baseUrl: a.url, tls, registration: h100Registration(node) });
      agents.push(onA);
      const other = await TestAgent.connect({
        baseUrl: a.url,
        tls: env.tls("gpu-stay-1"),
        registration: h100Registration("gpu-stay-1"),
        autoAnswer: true,
      });
      agents.push(other);
      const oldSession = (await readAll(log))
        .map((r) => r.event.body)
        .find((b) => b.case === "sessionOpened" && b.value.nodeId === node);
      assert.ok(oldSession?.case === "sessionOpened");

      // The agent reconnects through gateway B.
      const onB = await TestAgent.connect({
        baseUrl: b.url,
        tls,
        registration: h100Registration(node),
        autoAnswer: true,
      });
      agents.push(onB);
      const err = await onA.ended;
      assert.equal(codeOf(err), "Aborted");
      assert.match(String(err), /superseded by a newer session on gateway gw-b/);

      const records = await waitForLog(
        log,
        (rs) => rs.some((r) => r.event.body.case === "sessionClosed" && r.event.body.value.nodeId === node),
        "the superseded session closed",
      );
      const opened = records
        .map((r) => r.event.body)
        .filter((x) => x.case === "sessionOpened" && x.value.nodeId === node);
      assert.equal(opened.length, 2);
      const newSession = opened[1]!.value as { sessionId: string; gatewayId: string };
      assert.equal(newSession.gatewayId, "gw-b");
      const closed = records.find((r) => r.event.body.case === "sessionClosed")?.event.body;
      assert.ok(closed?.case === "sessionClosed");
      assert.equal(closed.value.sessionId, oldSession.value.sessionId);
      assert.equal(closed.value.gatewayId, "gw-a");
      assert.equal(closed.value.reason, SessionClosed_Reason.SUPERSEDED);
      await waitUntil(() => a.registry.forNode(node).length === 0, "A lets go of the node");

      // A pass addressing both sessions: only the current one, held by B, gets its command.
      await log.append(
        stopPass("pass-1", [
          { commandId: "cmd-old", nodeId: node, sessionId: oldSession.value.sessionId },
          { commandId: "cmd-new", nodeId: node, sessionId: newSession.sessionId },
        ]),
      );
      await onB.waitFor((m) => m.msg.case === "stop");
      await waitForLog(
        log,
        (rs) => rs.some((r) => r.event.body.case === "commandResult"),
        "B's agent's command result",
      );
      assert.deepEqual(
        onB.commands().map((c) => c.value.commandId),
        ["cmd-new"],
      );
      assert.equal((await a.metrics.commandsRelayed.get()).values[0]?.value ?? 0, 0);
      assert.equal((await b.metrics.commandsRelayed.get()).values[0]?.value, 1);
      const droppedByA = async (reason: string) =>
        (await a.metrics.commandsDropped.get()).values.find((v) => v.labels.reason === reason)?.value;
      // The new session was never A's; the old one was, so A reports its command undeliverable.
      assert.equal(await droppedByA("not_held"), 1);
      assert.equal(await droppedByA("session_closed"), 1);
      const reports = await waitForLog(
        log,
        (rs) => rs.some((r) => r.event.body.case === "commandUndeliverable"),
        "A's report of the command for the session it held",
      );
      assert.deepEqual(
        reports.flatMap((r) =>
          r.event.body.case === "commandUndeliverable"
            ? [[r.event.body.value.commandId, r.event.body.value.gatewayId, r.event.body.value.sessionId]]
            : [],
        ),
        [["cmd-old", "gw-a", oldSession.value.sessionId]],
      );
      // A still serves its other agent.
      assert.equal(other.done, false);
      await other.waitForAck(other.shardStatus({ shardId: "still-here" }));
    } finally {
      for (const ag of agents) ag.abort();
      for (const g of gws) await g.drain("test over");
      await log.jsm.streams.delete(stream).catch(() => {});
      await log.close();
    }
  });

  it("closes an older session on the same gateway too", async () => {
    const { log, stream, prefix } = await openTestLog(env.server.url, "GWSAME");
    let gw: Gateway | undefined;
    const agents: TestAgent[] = [];
    try {
      gw = await startTestGateway({ nats: env.server.url, stream, prefix, certs: env.certs, id: "gw-one" });
      const node = "gpu-twice-1";
      const tls = env.tls(node);
      const first = await TestAgent.connect({ baseUrl: gw.url, tls, registration: h100Registration(node) });
      agents.push(first);
      const second = await TestAgent.connect({ baseUrl: gw.url, tls, registration: h100Registration(node) });
      agents.push(second);
      const err = await first.ended;
      assert.equal(codeOf(err), "Aborted");
      assert.match(String(err), /gateway gw-one/);
      assert.equal(second.done, false);
    } finally {
      for (const ag of agents) ag.abort();
      await gw?.drain("test over");
      await log.jsm.streams.delete(stream).catch(() => {});
      await log.close();
    }
  });
});
