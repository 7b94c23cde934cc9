/**
 * The gateway's publish path under a window of one, through a real
 * nats-server, a real gateway and real Connect streams: several agents
 * sending as fast as their streams take it share one publish in flight, so
 * every event is started from the ack that freed the slot (the slot handed
 * to the stream that waited longest). Every event is stored once, each
 * session's in the order its agent sent them, every message is acked, and
 * no more than one publish is ever in flight.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { codeOf, TestAgent } from "../support/agent.js";
import { waitForLog } from "../support/gateway.js";
import { nodeOf } from "../support/log-hygiene.js";
import { h100Registration } from "../support/sample-events.js";
import { gatewaySuite } from "../support/suites.js";

const AGENTS = 4;
const EACH = 60;

describe("gateway: streams sharing a publish window of one", () => {
  const env = gatewaySuite("GWWINDOW", { gateway: () => ({ publishWindow: 1, streamWindow: 2 }) });

  it("stores every event once, in each session's order, and never has two publishes in flight", async () => {
    const agents = await Promise.all(
      Array.from({ length: AGENTS }, (_, i) =>
        TestAgent.connect({ baseUrl: env.gw.url, registration: h100Registration(`gpu-window-${i}`) }),
      ),
    );
    let most = 0;
    const sampler = setInterval(() => {
      most = Math.max(most, env.gw.publisher.inFlight);
    }, 1);
    try {
      const last = agents.map((a) => {
        let seq = 0;
        for (let i = 0; i < EACH; i++)
          seq = a.shardStatus({ shardId: `s${i}`, state: ShardStatus_State.RUNNING });
        return seq;
      });
      await Promise.all(agents.map((a, i) => a.waitForAck(last[i]!, 60_000)));
      for (const a of agents) assert.equal(codeOf(await a.close()), "OK");
    } finally {
      clearInterval(sampler);
      for (const a of agents) a.abort();
    }
    assert.ok(most <= 1, `${most} publishes in flight at once with a window of one`);

    const records = await waitForLog(
      env.log,
      (rs) => rs.filter((r) => r.event.body.case === "sessionClosed").length >= AGENTS,
      "every session's closed event",
    );
    for (let i = 0; i < AGENTS; i++) {
      const node = `gpu-window-${i}`;
      const events = records.filter((r) => nodeOf(r) === node).map((r) => r.event);
      const shards = events.flatMap((e) => (e.body.case === "shardStatus" ? [e.body.value] : []));
      assert.deepEqual(
        shards.map((s) => s.status?.shardId),
        Array.from({ length: EACH }, (_, k) => `s${k}`),
        `${node}: every shard status once, in the order sent`,
      );
      assert.deepEqual(
        shards.map((s) => Number(s.sessionSeq)),
        Array.from({ length: EACH }, (_, k) => k + 2),
        `${node}: session sequences grow with the log`,
      );
      assert.equal(events.at(-1)?.body.case, "sessionClosed", `${node}: the session-closed event comes last`);
    }
  });
});
