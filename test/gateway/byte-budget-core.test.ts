/**
 * The session core's byte budget, text caps and reconnect limit, without
 * NATS or streams (the real-stream tests are byte-budget.test.ts): text over
 * its cap is cut with a marker and a note, a message within its caps is
 * passed on as it came, the event size the budget charges is never below
 * the stored size, an agent sending 100 KiB outputs is cut off by bytes
 * within the default event budget, and the reconnect bucket admits a burst,
 * then says when to come back.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { encodeEvent } from "../../src/codec/index.js";
import { gatewayEvent } from "../../src/gateway/events.js";
import {
  admitRegistration,
  capText,
  closeOutcome,
  eventBytes,
  initialState,
  type SessionState,
  step,
  truncationMarker,
} from "../../src/gateway/session-core/index.js";
import { capRegistration, capShardStatus } from "../../src/gateway/session-core/text-caps.js";
import { AgentMessageSchema, RegisterSchema, ShardStatusSchema } from "../../src/gen/llmgw/v1/agent_pb.js";
import { SessionClosed_Reason } from "../../src/gen/llmgw/v1/events_pb.js";
import { coreConfig } from "../support/core-config.js";
import { h100Registration, sampleEvents } from "../support/sample-events.js";

/** The gateway's defaults (config.ts). */
const CONFIG = coreConfig();
const NODE = "gpu-a1";
const SESSION = "0b5e55ed-0000-4000-8000-0000000000b7";

function opened(config = CONFIG): SessionState {
  let s = initialState(config, { kind: "verified", commonName: NODE }, SESSION);
  const reg = create(AgentMessageSchema, { msg: { case: "register", value: h100Registration(NODE) } });
  s = step(s, { kind: "message", message: reg, draining: false, at: 0 }).state;
  s = step(s, { kind: "admitted" }).state;
  s = step(s, { kind: "stored", messageId: "register", seq: 1 }).state;
  assert.equal(s.phase, "open");
  return s;
}

describe("text caps", () => {
  it("cuts text over its cap to exactly the cap, ending with a marker that gives the length", () => {
    const cut = capText("a".repeat(5000), 1024);
    assert.equal(cut.length, 1024);
    assert.ok(cut.endsWith(truncationMarker(5000)));
    assert.equal(cut, "a".repeat(1024 - truncationMarker(5000).length) + truncationMarker(5000));
    assert.equal(capText("short", 1024), "short");
    assert.equal(capText("x".repeat(1024), 1024), "x".repeat(1024), "at the cap: untouched");
  });

  it("never cuts a surrogate pair in half", () => {
    const text = "😀".repeat(1000); // 2000 UTF-16 units
    for (const max of [100, 101, 102, 103]) {
      const cut = capText(text, max);
      assert.ok(cut.length <= max);
      assert.ok(!/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/.test(cut), `no lone high surrogate at cap ${max}`);
    }
  });

  it("passes a message within its caps on as it came, and names the fields it cut", () => {
    const st = create(ShardStatusSchema, { shardId: "s1", error: "boom", lastOutput: "tail" });
    const same = capShardStatus(st, CONFIG.textCaps);
    assert.equal(same.value, st, "no copy");
    assert.deepEqual(same.fields, []);
    const long = capShardStatus(
      { ...st, lastOutput: "o".repeat(10_000), error: "e".repeat(2000) },
      CONFIG.textCaps,
    );
    assert.deepEqual([...long.fields].sort(), ["error", "last_output"]);
    assert.equal(long.value.lastOutput.length, 4096);
    assert.equal(long.value.error.length, 1024);
    assert.equal(long.value.shardId, "s1", "ids untouched");

    const reg = create(RegisterSchema, h100Registration(NODE));
    assert.equal(capRegistration(reg, CONFIG.textCaps).value, reg);
    const wordy = capRegistration(
      { ...reg, agentVersion: "v".repeat(2000), labels: { k: "l".repeat(2000) } },
      CONFIG.textCaps,
    );
    assert.deepEqual([...wordy.fields].sort(), ["agent_version", "labels"]);
    assert.equal(wordy.value.nodeId, NODE);
    assert.equal(wordy.value.gpus.length, reg.gpus.length);
  });

  it("a session's event carries the cut text and the step notes it", () => {
    const s = opened();
    const r = step(s, {
      kind: "message",
      message: create(AgentMessageSchema, {
        msg: { case: "shard", value: { shardId: "s1", replicaId: "r1", lastOutput: "x".repeat(100 * 1024) } },
      }),
      draining: false,
      at: 1,
    });
    const body = r.events[0]?.body;
    assert.ok(body?.case === "shardStatus");
    assert.equal(body.value.status?.lastOutput?.length, 4096);
    assert.ok(body.value.status?.lastOutput?.endsWith(truncationMarker(100 * 1024)));
    assert.deepEqual(r.notes, [{ kind: "text-truncated", fields: ["last_output"] }]);
    assert.equal(r.close, undefined);
  });
});

describe("byte budget", () => {
  it("charges an event at least its stored size", () => {
    const wide = create(ShardStatusSchema, {
      replicaId: "r-é",
      shardId: "s-😀",
      state: 5,
      exitCode: -1,
      error: "ошибка",
      lastOutput: "日本語".repeat(300),
      endpoint: "http://10.0.0.1:8000",
    });
    const body = {
      case: "shardStatus" as const,
      value: { nodeId: NODE, sessionId: SESSION, sessionSeq: 9n, status: wide },
    };
    const id = `${SESSION}-9`;
    const stored = encodeEvent(gatewayEvent("gw-1", id, body)).length;
    assert.ok(
      eventBytes(id, body) >= stored,
      `non-ASCII text: charged ${eventBytes(id, body)}, stored ${stored}`,
    );
    for (const e of sampleEvents()) {
      if (e.body.case === undefined) continue;
      const stored = encodeEvent(gatewayEvent("gw-1", e.id, e.body)).length;
      const charged = eventBytes(e.id, e.body);
      assert.ok(charged >= stored, `${e.body.case}: charged ${charged}, stored ${stored}`);
      assert.ok(charged <= stored * 2 + 128, `${e.body.case}: charged ${charged}, stored ${stored}`);
    }
  });

  it("with the defaults, 100 KiB outputs are cut off by bytes long before the event budget", () => {
    let s = opened();
    let written = 0;
    let close: ReturnType<typeof step>["close"];
    for (let i = 0; i < 600 && !close; i++) {
      const r = step(s, {
        kind: "message",
        message: create(AgentMessageSchema, {
          msg: {
            case: "shard",
            value: { shardId: "s1", replicaId: "r1", lastOutput: "x".repeat(100 * 1024) },
          },
        }),
        draining: false,
        at: 1 + i,
      });
      s = r.state;
      written += r.events.length;
      close = r.close;
    }
    assert.equal(close?.kind, "byte-budget");
    assert.deepEqual(closeOutcome(close!), {
      reason: SessionClosed_Reason.EVENT_BUDGET,
      code: Code.ResourceExhausted,
      dropsQueued: false,
    });
    assert.match(close!.detail, /more bytes than its budget of 1048576 a minute \(burst 2097152\)/);
    assert.ok(written > 400 && written < 600, `${written} events written before the byte budget ran out`);
  });
});

describe("reconnect limit", () => {
  const budget = { perMinute: 6, burst: 3 };

  it("admits a burst, then says when to come back; a refused attempt costs nothing", () => {
    let bucket: Parameters<typeof admitRegistration>[1];
    for (let i = 0; i < 3; i++) {
      const d = admitRegistration("gpu-a1", bucket, budget, 1000);
      assert.ok(d.admitted);
      bucket = d.bucket;
    }
    const no = admitRegistration("gpu-a1", bucket, budget, 1000);
    assert.ok(!no.admitted);
    assert.equal(no.retryAfterMs, 10_000, "one registration refills in 10 s at 6 a minute");
    assert.match(
      no.detail,
      /node gpu-a1 registers more often than 6 times a minute \(burst 3\); reconnect after 10000 ms/,
    );
    const later = admitRegistration("gpu-a1", bucket, budget, 6000);
    assert.ok(!later.admitted);
    assert.equal(later.retryAfterMs, 5000, "the wait shrinks as the bucket refills");
    assert.ok(admitRegistration("gpu-a1", bucket, budget, 11_000).admitted, "admitted when told");
  });
});
