/**
 * What one agent may cost the log in bytes, through a real nats-server, a
 * real gateway and real Connect streams:
 *
 * - an agent sending 100 KiB `last_output`s, well within its event budget,
 *   has each cut to the gateway's cap with a marker (visible in the log's
 *   events), and is cut off by its byte budget: ResourceExhausted, and a
 *   SessionClosed{EVENT_BUDGET} naming the byte budget;
 * - a node registering faster than the reconnect limit is refused with
 *   ResourceExhausted and told when to come back (a Reconnect with the
 *   time), and nothing reaches the log for it.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { encodeEvent } from "../../src/codec/index.js";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { SessionClosed_Reason } from "../../src/gen/llmgw/v1/events_pb.js";
import { codeOf, TestAgent } from "../support/agent.js";
import { readAll, waitForLog } from "../support/gateway.js";
import { nodeOf } from "../support/log-hygiene.js";
import { h100Registration } from "../support/sample-events.js";
import { gatewaySuite } from "../support/suites.js";

const KIB = 1024;
const OUTPUT = 100 * KIB;
const MARKER = `…[truncated by the gateway: ${OUTPUT} characters]`;

describe("gateway: an agent over its byte budget is cut off; long text is cut with a marker", () => {
  const BYTES = { perMinute: 64 * KIB, burst: 256 * KIB };
  const env = gatewaySuite("GWBYTES", {
    // The default event budget (600 a minute, 600 at once): only the bytes are small.
    // The production read limit (1 MiB; the test harness's is smaller): 100 KiB messages are taken.
    gateway: () => ({
      byteBudgetPerMinute: BYTES.perMinute,
      byteBudgetBurst: BYTES.burst,
      readMaxBytes: 1024 * KIB,
    }),
  });

  it("100 KiB last outputs at the agent's event rate: cut to 4096 characters each, then ResourceExhausted", async () => {
    const node = "gpu-verbose";
    const a = await TestAgent.connect({ baseUrl: env.gw.url, registration: h100Registration(node) });
    const output = `${"engine says: out of memory\n".repeat(Math.ceil(OUTPUT / 27))}`.slice(0, OUTPUT);
    let sent = 0;
    try {
      // Fewer than the event budget's burst of 600: the events alone would all be taken.
      for (; !a.done && sent < 500; sent++) {
        a.shardStatus({
          replicaId: "r1",
          shardId: "s1",
          state: ShardStatus_State.FAILED,
          exitCode: 1,
          error: "the engine exited with code 1",
          lastOutput: output,
        });
        if (sent % 20 === 19) await new Promise<void>((resolve) => setImmediate(resolve));
      }
      const err = await a.ended;
      assert.equal(codeOf(err), "ResourceExhausted", `the agent's stream ended with ${String(err)}`);
      assert.match(String(err), /more bytes than its budget of 65536 a minute \(burst 262144\)/);
    } finally {
      a.abort();
    }
    const records = await waitForLog(
      env.log,
      (rs) => rs.some((r) => r.event.body.case === "sessionClosed" && nodeOf(r) === node),
      "the session-closed event",
    );
    const mine = records.filter((r) => nodeOf(r) === node);
    const closed = mine.at(-1)?.event.body;
    assert.ok(closed?.case === "sessionClosed");
    assert.equal(SessionClosed_Reason[closed.value.reason], "EVENT_BUDGET");
    assert.match(closed.value.detail, /more bytes than its budget of 65536 a minute/);

    const statuses = mine.flatMap((r) => (r.event.body.case === "shardStatus" ? [r] : []));
    assert.ok(statuses.length >= 1, "some were written before the budget ran out");
    assert.ok(statuses.length < sent, `${statuses.length} of ${sent} written: the rest were not`);
    for (const r of statuses) {
      const st = r.event.body.case === "shardStatus" ? r.event.body.value.status : undefined;
      assert.equal(st?.lastOutput.length, 4096, "cut to the default cap");
      assert.ok(st?.lastOutput.endsWith(MARKER), "ending with the marker that says so");
      assert.ok(st?.lastOutput.startsWith("engine says: out of memory\n"), "the start kept");
      assert.equal(st?.error, "the engine exited with code 1", "short text untouched");
    }
    // What was stored stays within the budget (its burst, the refill over the session, one event's slack).
    const opened = mine.find((r) => r.event.body.case === "sessionOpened")!;
    const elapsedMs = Number(mine.at(-1)!.event.timeUnixMs - opened.event.timeUnixMs);
    const stored = statuses.reduce((n, r) => n + encodeEvent(r.event).length, 0);
    const allowed = BYTES.burst + (elapsedMs * BYTES.perMinute) / 60_000;
    assert.ok(stored <= allowed, `${stored} bytes stored in ${elapsedMs} ms; the budget allows ${allowed}`);
    assert.ok(stored >= BYTES.burst / 2, `${stored} bytes stored: the budget, not something else, ended it`);

    const text = await env.gw.metrics.registry.metrics();
    assert.match(text, /^llmgw_gateway_sessions_over_byte_budget_total 1$/m);
    assert.match(text, /^llmgw_gateway_sessions_over_budget_total 0$/m);
    assert.match(text, /^llmgw_gateway_byte_budget\{limit="per_minute"\} 65536$/m);
    assert.match(text, /^llmgw_gateway_byte_budget\{limit="burst"\} 262144$/m);
    assert.match(text, /^llmgw_gateway_text_cap_chars\{field="last_output"\} 4096$/m);
    const cut = Number(/^llmgw_gateway_text_truncated_total\{field="last_output"\} (\d+)$/m.exec(text)?.[1]);
    assert.ok(cut >= statuses.length, `${cut} last outputs counted as cut`);
    assert.match(text, /^llmgw_gateway_disconnects_total\{reason="EVENT_BUDGET"\} 1$/m);
  });

  it("cuts long labels, GPU names and errors at registration and in results, and keeps the session", async () => {
    const node = "gpu-wordy";
    const reg = h100Registration(node);
    const a = await TestAgent.connect({
      baseUrl: env.gw.url,
      registration: {
        ...reg,
        labels: { ...reg.labels, note: "n".repeat(5000) },
        gpus: reg.gpus?.map((g, i) => (i === 0 ? { ...g, product: "H".repeat(3000) } : g)),
      },
    });
    try {
      const last = a.commandResult({ commandId: "c-1", ok: false, error: "e".repeat(10_000) });
      await a.waitForAck(last);
      assert.equal(a.done, false, "nothing was refused");
      assert.equal(codeOf(await a.close()), "OK");
    } finally {
      a.abort();
    }
    const mine = (await readAll(env.log)).filter((r) => nodeOf(r) === node);
    const opened = mine.find((r) => r.event.body.case === "sessionOpened")?.event.body;
    assert.ok(opened?.case === "sessionOpened");
    const note = opened.value.registration?.labels["note"] ?? "";
    assert.equal(note.length, 1024);
    assert.match(note, /^n+…\[truncated by the gateway: 5000 characters\]$/);
    assert.match(
      opened.value.registration?.gpus[0]?.product ?? "",
      /…\[truncated by the gateway: 3000 characters\]$/,
    );
    const result = mine.find((r) => r.event.body.case === "commandResult")?.event.body;
    assert.ok(result?.case === "commandResult");
    assert.equal(result.value.result?.error.length, 1024);
    assert.match(result.value.result?.error ?? "", /…\[truncated by the gateway: 10000 characters\]$/);
  });
});

describe("gateway: a node reconnecting faster than the reconnect limit", () => {
  const env = gatewaySuite("GWRECON", {
    gateway: () => ({ reconnectsPerMinute: 6, reconnectBurst: 3 }),
  });

  it("is refused with ResourceExhausted and told when to come back; nothing reaches the log for it", async () => {
    const node = "gpu-bouncy";
    for (let i = 0; i < 3; i++) {
      const a = await TestAgent.connect({ baseUrl: env.gw.url, registration: h100Registration(node) });
      assert.equal(codeOf(await a.close()), "OK");
      a.abort();
    }
    const before = (await readAll(env.log)).filter(
      (r) => r.event.body.case === "sessionOpened" && nodeOf(r) === node,
    ).length;
    assert.equal(before, 3);
    const refused = TestAgent.open({ baseUrl: env.gw.url, registration: h100Registration(node) });
    try {
      const err = await refused.ended;
      assert.equal(codeOf(err), "ResourceExhausted", String(err));
      assert.match(
        String(err),
        /registers more often than 6 times a minute \(burst 3\); reconnect after \d+ ms/,
      );
      const hint = refused.received.find((m) => m.msg.case === "reconnect");
      assert.ok(hint?.msg.case === "reconnect", "told to reconnect later");
      // The next registration is due when the bucket has refilled one (10 s at 6 a minute).
      assert.ok(hint.msg.value.retryAfterMs > 5_000 && hint.msg.value.retryAfterMs <= 10_000);
    } finally {
      refused.abort();
    }
    // Another node is not affected.
    const other = await TestAgent.connect({
      baseUrl: env.gw.url,
      registration: h100Registration("gpu-calm"),
    });
    assert.equal(codeOf(await other.close()), "OK");
    other.abort();
    const after = (await readAll(env.log)).filter(
      (r) => r.event.body.case === "sessionOpened" && nodeOf(r) === node,
    ).length;
    assert.equal(after, 3, "no session opened for the refused registration");
    const text = await env.gw.metrics.registry.metrics();
    assert.match(text, /^llmgw_gateway_reconnects_refused_total 1$/m);
    assert.match(text, /^llmgw_gateway_reconnect_limit\{limit="per_minute"\} 6$/m);
    assert.match(text, /^llmgw_gateway_reconnect_limit\{limit="burst"\} 3$/m);
  });
});
