/**
 * Agents flooding the log, through a real nats-server, a real gateway and
 * real Connect streams: one whose GPU memory readings alternate between 0
 * and 5,000 MiB and one inventing a new problem in every heartbeat, each
 * sending 20,000 heartbeats as fast as it can, add at most one usage event
 * per usage interval to the log (counted in the log, by kind, for the
 * node, against the session's time in the log); and with a small event
 * budget such an agent is cut off with ResourceExhausted and a
 * SessionClosed{EVENT_BUDGET} naming the budget.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { type Event, SessionClosed_Reason } from "../../src/gen/llmgw/v1/events_pb.js";
import { codeOf, TestAgent } from "../support/agent.js";
import { waitForLog } from "../support/gateway.js";
import { nodeOf } from "../support/log-hygiene.js";
import { h100Registration } from "../support/sample-events.js";
import { type GatewaySuite, gatewaySuite } from "../support/suites.js";

const HEARTBEATS = 20_000;
const mib = (n: number) => Array.from({ length: 8 }, () => BigInt(n));

/** What one flooding heartbeat says: `i`-th of its kind. */
const FLOODS = {
  alternating: (i: number) => ({ gpuMemoryUsedMb: mib(i % 2 === 0 ? 5_000 : 0) }),
  "new-problems": (i: number) => ({ newProblems: [`Xid 13: invented problem ${i}`] }),
} as const;

/** The node's events once its session closed, and the session's time in the log (opened to closed), ms. */
async function sessionOf(env: GatewaySuite, node: string): Promise<{ events: Event[]; elapsedMs: number }> {
  const records = await waitForLog(
    env.log,
    (rs) => rs.some((r) => r.event.body.case === "sessionClosed" && nodeOf(r) === node),
    `the session-closed event of ${node}`,
  );
  const events = records.filter((r) => nodeOf(r) === node).map((r) => r.event);
  const opened = events.find((e) => e.body.case === "sessionOpened");
  const closed = events.find((e) => e.body.case === "sessionClosed");
  assert.ok(opened && closed, `${node}: opened and closed in the log`);
  return { events, elapsedMs: Number(closed.timeUnixMs - opened.timeUnixMs) };
}

const countBy = (events: Event[]) => {
  const n: Record<string, number> = {};
  for (const e of events) n[e.body.case ?? "none"] = (n[e.body.case ?? "none"] ?? 0) + 1;
  return n;
};

describe("gateway: agents flooding the log get one usage event per interval", () => {
  const INTERVAL = 250;
  const env = gatewaySuite("GWFLOOD", { gateway: () => ({ usageIntervalMs: INTERVAL }) });

  for (const [name, heartbeat] of Object.entries(FLOODS)) {
    it(`${name}: 20,000 heartbeats as fast as the stream takes them`, async () => {
      const node = `gpu-flood-${name}`;
      const a = await TestAgent.connect({ baseUrl: env.gw.url, registration: h100Registration(node) });
      try {
        for (let i = 0; i < HEARTBEATS; i++) a.heartbeat(heartbeat(i));
        // Acked once stored, after every heartbeat before it was read.
        const last = a.shardStatus({ shardId: "s1", state: ShardStatus_State.RUNNING });
        await a.waitForAck(last, 120_000);
        assert.equal(codeOf(await a.close()), "OK", "the agent stays within the default budget");
      } finally {
        a.abort();
      }
      const { events, elapsedMs } = await sessionOf(env, node);
      const n = countBy(events);
      const bound = Math.floor(elapsedMs / INTERVAL) + 2; // the first at once, the last at the close
      assert.ok(
        (n["usageChanged"] ?? 0) <= bound,
        `${n["usageChanged"]} usage events in ${elapsedMs} ms; at most ${bound} at one per ${INTERVAL} ms`,
      );
      assert.ok((n["usageChanged"] ?? 0) >= 1, "the flood is recorded");
      assert.deepEqual(
        { ...n, usageChanged: 0 },
        { sessionOpened: 1, usageChanged: 0, shardStatus: 1, sessionClosed: 1 },
        "nothing else was written",
      );
      const coalesced = (await env.gw.metrics.eventsCoalesced.get()).values;
      assert.ok(
        coalesced.some((v) => v.labels["kind"] === "usage" && v.value > 0),
        "the coalesced heartbeats are counted",
      );
    });
  }

  it("the last reading of an interval reaches the log at its end, and the log ends with the latest", async () => {
    const node = "gpu-flood-latest";
    const a = await TestAgent.connect({ baseUrl: env.gw.url, registration: h100Registration(node) });
    try {
      a.heartbeat({ gpuMemoryUsedMb: mib(5_000) }); // at once
      a.heartbeat({ gpuMemoryUsedMb: mib(40_000) }); // waits for the interval's end
      await waitForLog(
        env.log,
        (rs) =>
          rs.some(
            (r) =>
              r.event.body.case === "usageChanged" &&
              nodeOf(r) === node &&
              r.event.body.value.gpuMemoryUsedMb[0] === 40_000n,
          ),
        "the withheld reading at the end of its interval",
      );
      // A new interval began with that event: these wait, and the latest wins at the close.
      a.heartbeat({ gpuMemoryUsedMb: mib(10_000) });
      a.heartbeat({ gpuMemoryUsedMb: mib(70_000) });
      assert.equal(codeOf(await a.close()), "OK");
    } finally {
      a.abort();
    }
    const { events } = await sessionOf(env, node);
    const usage = events.flatMap((e) =>
      e.body.case === "usageChanged" ? [e.body.value.gpuMemoryUsedMb[0]] : [],
    );
    // 10,000 MiB is written only if the log was read more than an interval after the flush.
    assert.deepEqual(usage.slice(0, 2), [5_000n, 40_000n]);
    assert.equal(usage.at(-1), 70_000n, "the log ends with the latest reading");
    assert.ok(usage.length <= 4);
    assert.equal(events.at(-1)?.body.case, "sessionClosed");
  });
});

describe("gateway: an agent over its event budget is cut off", () => {
  const INTERVAL = 100;
  const BUDGET = { perMinute: 60, burst: 5 };
  const env = gatewaySuite("GWBUDGET", {
    gateway: () => ({
      usageIntervalMs: INTERVAL,
      eventBudgetPerMinute: BUDGET.perMinute,
      eventBudgetBurst: BUDGET.burst,
    }),
  });

  for (const [name, heartbeat] of Object.entries(FLOODS)) {
    it(`${name}: ResourceExhausted and SessionClosed{EVENT_BUDGET}`, async () => {
      const node = `gpu-budget-${name}`;
      const a = await TestAgent.connect({ baseUrl: env.gw.url, registration: h100Registration(node) });
      try {
        // As fast as the stream takes them, until the gateway ends the stream
        // (bounded: a gateway that never cut it off fails below).
        for (let i = 0; !a.done && i < 10 * HEARTBEATS; i++) {
          a.heartbeat(heartbeat(i));
          if (i % 500 === 499) await new Promise<void>((resolve) => setImmediate(resolve));
        }
        const err = await a.ended;
        assert.equal(codeOf(err), "ResourceExhausted", `the agent's stream ended with ${String(err)}`);
        assert.match(String(err), /budget of 60 a minute \(burst 5\)/);
      } finally {
        a.abort();
      }
      const { events, elapsedMs } = await sessionOf(env, node);
      const closed = events.at(-1)?.body;
      assert.ok(closed?.case === "sessionClosed");
      assert.equal(SessionClosed_Reason[closed.value.reason], "EVENT_BUDGET");
      const usage = countBy(events)["usageChanged"] ?? 0;
      const allowed = BUDGET.burst + Math.ceil((elapsedMs * BUDGET.perMinute) / 60_000);
      assert.ok(usage <= allowed, `${usage} usage events in ${elapsedMs} ms; the budget allows ${allowed}`);
      assert.ok(usage <= Math.floor(elapsedMs / INTERVAL) + 1, "and at most one per interval");
    });
  }

  it("counts the sessions closed for their budget, and shows the budget", async () => {
    const text = await env.gw.metrics.registry.metrics();
    assert.match(text, /^llmgw_gateway_sessions_over_budget_total 2$/m);
    assert.match(text, /^llmgw_gateway_event_budget\{limit="per_minute"\} 60$/m);
    assert.match(text, /^llmgw_gateway_event_budget\{limit="burst"\} 5$/m);
    assert.match(text, /^llmgw_gateway_disconnects_total\{reason="EVENT_BUDGET"\} 2$/m);
  });
});
