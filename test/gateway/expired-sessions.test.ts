/**
 * Regression: a gateway whose lease lapsed (paused, slow, cut off for a
 * moment) had its sessions recorded closed by the reconciler, yet kept the
 * streams open: agents believed they were connected while the log said
 * they were gone (found by the reconnect storm: 29 of 300 agents "connected"
 * that the log showed disconnected, heading for suspect and lost). The
 * gateway now ends the streams the log calls expired, and the agents
 * register again.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code } from "@connectrpc/connect";
import type { Gateway } from "../../src/gateway/index.js";
import { SessionClosed_Reason } from "../../src/gen/llmgw/v1/events_pb.js";
import { TestAgent } from "../support/agent.js";
import { decide, EventFactory } from "../support/fleet-events.js";
import { rand, startTestGateway, waitForLog } from "../support/gateway.js";
import { h100Registration } from "../support/sample-events.js";
import { openTestLog, serverSuite } from "../support/suites.js";

describe("gateway: sessions the reconciler expired", () => {
  const env = serverSuite();

  it("ends the expired stream (Unavailable, SessionClosed EXPIRED) and leaves the others alone", async () => {
    const { log, stream, prefix } = await openTestLog(env.server.url, "EXP");
    let gw: Gateway | undefined;
    const agents: TestAgent[] = [];
    try {
      gw = await startTestGateway({ nats: env.server.url, stream, prefix });
      for (const node of ["gpu-e1", "gpu-e2"]) {
        agents.push(await TestAgent.connect({ baseUrl: gw.url, registration: h100Registration(node, []) }));
      }
      const [expired, kept] = agents as [TestAgent, TestAgent];
      const f = new EventFactory(`exp-${rand()}`);
      // The reconciler's decision, as it appends it when the gateway's lease key expired.
      await log.append(
        f.pass(
          [decide.sessionsExpired(gw.config.id, [{ node: expired.nodeId, session: expired.sessionId }])],
          [],
          await log.lastSeq(),
        ),
      );
      const end = await expired.ended;
      assert.equal(end?.code, Code.Unavailable, String(end));
      assert.match(end?.rawMessage ?? "", /recorded this session closed .* register again/);
      const records = await waitForLog(
        log,
        (rs) =>
          rs.some(
            (r) =>
              r.event.body.case === "sessionClosed" &&
              r.event.body.value.sessionId === expired.sessionId &&
              r.event.body.value.reason === SessionClosed_Reason.EXPIRED,
          ),
        "SessionClosed EXPIRED for the expired session",
      );
      assert.ok(
        !records.some(
          (r) => r.event.body.case === "sessionClosed" && r.event.body.value.sessionId === kept.sessionId,
        ),
        "the other session is untouched",
      );
      assert.equal(kept.done, false);
    } finally {
      for (const a of agents) a.abort();
      await gw?.drain("test over");
      await log.close();
    }
  });
});
