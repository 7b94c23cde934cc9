/**
 * The pure session core (src/gateway/session-core) without NATS or streams:
 * given a state, when an input arrives, then these events, replies and
 * close. The hostile and fuzzed inputs that hostile.test.ts and
 * fuzz.test.ts send through real streams are fed to `step` here too: it
 * never throws, closes with the right reason and code, and every event it
 * makes encodes and decodes as a well-formed event of the node.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, fromBinary, fromJsonString } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { encodeEvent } from "../../src/codec/index.js";
import { gatewayEvent } from "../../src/gateway/events.js";
import type { PeerIdentity } from "../../src/gateway/session-core/index.js";
import {
  type Close,
  closeOutcome,
  type Input,
  initialState,
  readDeadlineMs,
  type SessionState,
  type StepResult,
  step,
} from "../../src/gateway/session-core/index.js";
import { type AgentMessage, AgentMessageSchema } from "../../src/gen/llmgw/v1/agent_pb.js";
import { SessionClosed_Reason } from "../../src/gen/llmgw/v1/events_pb.js";
import { decodeEvent } from "../../src/log/index.js";
import { Fuzzer } from "../support/agent-fuzzer.js";
import { coreConfig } from "../support/core-config.js";
import {
  type AgentMessageInit,
  BAD_ENDPOINTS,
  DUPLICATES,
  MANY_FIELDS,
  ODD_NODE_IDS,
  RESERVED_IDS,
} from "../support/hostile-cases.js";
import { nodeOf } from "../support/log-hygiene.js";
import { h100Registration } from "../support/sample-events.js";

const CONFIG = coreConfig();
const SESSION = "0b5e55ed-0000-4000-8000-000000000001";
const verified = (node: string): PeerIdentity => ({ kind: "verified", commonName: node });

const msg = (init: AgentMessageInit): AgentMessage => create(AgentMessageSchema, init);
/** Messages a second apart (time is an input of the core). */
let clock = 0;
const message = (init: AgentMessageInit, draining = false): Input => {
  clock += 1_000;
  return { kind: "message", message: msg(init), draining, at: clock };
};
const registration = (node: string, opts: { cumulativeAcks?: boolean } = {}): AgentMessageInit => ({
  msg: { case: "register", value: { ...h100Registration(node), ...opts } },
});

/** Feeds `inputs` in order; the results of each step and the state after the last. */
function when(state: SessionState, ...inputs: Input[]): { state: SessionState; steps: StepResult[] } {
  const steps: StepResult[] = [];
  for (const input of inputs) {
    const r = step(state, input);
    steps.push(r);
    state = r.state;
  }
  return { state, steps };
}

/** The log stored the event the agent is acked for with `messageId`. */
let logSeq = 0;
const stored = (messageId: string): Input => ({ kind: "stored", messageId, seq: ++logSeq });

/** A session of `node` that registered, was admitted, and whose session-opened event is stored. */
function opened(node = "gpu-a1", opts: { cumulativeAcks?: boolean } = {}): SessionState {
  const { state } = when(
    initialState(CONFIG, verified(node), SESSION),
    message(registration(node, opts)),
    { kind: "admitted" },
    stored("register"),
  );
  assert.equal(state.phase, "open");
  return state;
}

/** `state` after the agent sent `n` shard statuses (their events on their way to the log). */
function sent(state: SessionState, n: number): SessionState {
  for (let i = 0; i < n; i++) {
    state = step(state, message({ msg: { case: "shard", value: { shardId: "s1", replicaId: "r1" } } })).state;
  }
  return state;
}

const closes = (steps: StepResult[]): Close[] => steps.flatMap((s) => (s.close ? [s.close] : []));
const codeName = (c: Close): string => {
  const code = closeOutcome(c).code;
  return code === undefined ? "OK" : Code[code];
};

describe("session core: opening", () => {
  it("a valid Register from the certificate's node, once admitted, becomes the session-opened event, acked once stored", () => {
    const read = step(initialState(CONFIG, verified("gpu-a1"), SESSION), message(registration("gpu-a1")));
    assert.equal(read.close, undefined);
    assert.equal(read.state.phase, "admitting");
    assert.deepEqual(read.events, [], "nothing is published before the gateway admits the stream");
    const r = step(read.state, { kind: "admitted" });
    assert.equal(r.state.phase, "opening");
    assert.deepEqual(
      r.events.map((e) => [e.id, e.body.case, e.ackId]),
      [[`${SESSION}-1`, "sessionOpened", "register"]],
    );
    assert.deepEqual(r.replies, [], "no ack before the log stored the session");
    const done = step(r.state, { kind: "stored", messageId: "register", seq: 42 });
    assert.equal(done.state.phase, "open");
    assert.equal(done.state.openedSeq, 42);
    const ack = done.replies[0]?.message.msg;
    assert.equal(done.replies[0]?.kind, "register-ack");
    assert.ok(ack?.case === "ack" && ack.value.messageId === "register" && ack.value.sessionId === SESSION);
  });

  it("refuses anything but a Register first, an early end and a silent stream", () => {
    const fresh = initialState(CONFIG, verified("gpu-a1"), SESSION);
    const cases: Array<[Input, Code, RegExp]> = [
      [
        message({ msg: { case: "heartbeat", value: {} } }),
        Code.InvalidArgument,
        /must be a Register, got heartbeat/,
      ],
      [message({}), Code.InvalidArgument, /got an empty message/],
      [{ kind: "stream-ended" }, Code.InvalidArgument, /ended before a Register/],
      [{ kind: "timer", timer: "read-deadline" }, Code.DeadlineExceeded, /no Register within 10000 ms/],
    ];
    for (const [input, code, detail] of cases) {
      const r = step(fresh, input);
      assert.equal(r.close?.kind, "refused", input.kind);
      assert.equal(closeOutcome(r.close).code, code, input.kind);
      assert.equal(closeOutcome(r.close).reason, undefined, "a refused stream has no session-closed event");
      assert.match(r.close.detail, detail);
      assert.deepEqual(r.events, []);
    }
  });

  it("the certificate decides who the agent is", () => {
    const cases: Array<[PeerIdentity, boolean, Code | "insecure-dev"]> = [
      [verified("gpu-b2"), false, Code.PermissionDenied],
      [{ kind: "none" }, false, Code.Unauthenticated],
      [
        { kind: "unverified", reason: "certificate has expired", commonName: "gpu-a1" },
        false,
        Code.Unauthenticated,
      ],
      [{ kind: "plaintext" }, false, Code.Unauthenticated],
      [{ kind: "plaintext" }, true, "insecure-dev"],
    ];
    for (const [peer, insecureDev, want] of cases) {
      const r = step(
        initialState({ ...CONFIG, insecureDev }, peer, SESSION),
        message(registration("gpu-a1")),
      );
      if (want === "insecure-dev") {
        const body = step(r.state, { kind: "admitted" }).events[0]?.body;
        assert.ok(body?.case === "sessionOpened" && body.value.identity === "insecure-dev");
      } else {
        assert.equal(r.close?.kind, "refused", peer.kind);
        assert.equal(closeOutcome(r.close).code, want, `${peer.kind}: ${r.close.detail}`);
      }
    }
  });

  it("a draining gateway refuses a new session (Unavailable)", () => {
    const r = step(initialState(CONFIG, verified("gpu-a1"), SESSION), message(registration("gpu-a1"), true));
    assert.equal(r.close?.kind, "refused");
    assert.equal(closeOutcome(r.close).code, Code.Unavailable);
    assert.match(r.close.detail, /gateway gw-1 is draining/);
  });

  it("a session-opened event the log did not take refuses the stream (Unavailable, retry)", () => {
    const { steps } = when(
      initialState(CONFIG, verified("gpu-a1"), SESSION),
      message(registration("gpu-a1")),
      { kind: "admitted" },
      {
        kind: "log-failed",
        unavailable: true,
        detail: "timeout",
      },
    );
    const [c] = closes(steps);
    assert.equal(c?.kind, "refused");
    assert.equal(closeOutcome(c).code, Code.Unavailable);
  });

  it("waits the registration timeout for the Register, the heartbeat timeout after it", () => {
    assert.equal(readDeadlineMs(initialState(CONFIG, verified("gpu-a1"), SESSION)), 10_000);
    assert.equal(readDeadlineMs(opened()), 15_000);
  });
});

describe("session core: messages of an open session", () => {
  it("a shard status becomes an event acked by its sequence once stored", () => {
    const r = step(opened(), message({ msg: { case: "shard", value: { shardId: "s1", replicaId: "r1" } } }));
    assert.deepEqual(
      r.events.map((e) => [e.id, e.body.case, e.ackId]),
      [[`${SESSION}-2`, "shardStatus", "2"]],
    );
    const acked = step(r.state, stored("2"));
    assert.deepEqual(
      acked.replies.map((x) => [x.kind, x.message.msg.case === "ack" && x.message.msg.value.messageId]),
      [["ack", "2"]],
    );
  });

  it("a heartbeat within the usage threshold keeps the session alive without an event; an unknown kind too", () => {
    const hb = step(opened(), message({ msg: { case: "heartbeat", value: {} } }));
    assert.deepEqual(hb.events, []);
    const unknown = step(hb.state, message({}));
    assert.deepEqual(unknown.events, []);
    assert.deepEqual(unknown.notes, [{ kind: "unknown-message", seq: 3 }]);
  });

  it("a heartbeat naming a new problem is an event, not acked", () => {
    const r = step(opened(), message({ msg: { case: "heartbeat", value: { newProblems: ["Xid 79"] } } }));
    assert.deepEqual(
      r.events.map((e) => [e.body.case, e.ackId]),
      [["usageChanged", undefined]],
    );
  });

  it("a re-registration naming another node ends the session (PROTOCOL_ERROR, InvalidArgument)", () => {
    const r = step(opened("gpu-a1"), message(registration("gpu-a2")));
    assert.equal(r.close?.kind, "protocol-error");
    assert.deepEqual(closeOutcome(r.close), {
      reason: SessionClosed_Reason.PROTOCOL_ERROR,
      code: Code.InvalidArgument,
      dropsQueued: false,
    });
    assert.deepEqual(r.events, []);
  });

  it("cumulative acks: the acks stored in one turn become one, written at the flush", () => {
    const { state, steps } = when(
      sent(opened("gpu-a1", { cumulativeAcks: true }), 3),
      stored("2"),
      stored("3"),
      stored("4"),
    );
    assert.deepEqual(
      steps.map((s) => s.timers),
      [["ack-later"], [], ["ack-flush"]],
      "the later timer while more is on its way, one flush once nothing is",
    );
    assert.equal(steps.flatMap((s) => s.notes).filter((n) => n.kind === "ack-coalesced").length, 2);
    assert.deepEqual(
      steps.flatMap((s) => s.replies),
      [],
    );
    const flush = step(state, { kind: "timer", timer: "ack-flush" });
    assert.deepEqual(
      flush.replies.map((x) => [x.kind, x.message.msg.case === "ack" && x.message.msg.value.messageId]),
      [["cumulative-ack", "4"]],
    );
  });

  const ackIds = (steps: StepResult[]) =>
    steps.flatMap((s) =>
      s.replies.map((x) => (x.message.msg.case === "ack" ? x.message.msg.value.messageId : "?")),
    );

  it("cumulative acks: while more is on its way to the log, one ack waits for ackEvery stored messages", () => {
    const stores = Array.from({ length: 16 }, (_, i) => stored(String(i + 2)));
    const { state, steps } = when(sent(opened("gpu-a1", { cumulativeAcks: true }), 21), ...stores);
    assert.deepEqual(
      steps.map((s) => s.timers),
      [["ack-later"], ...Array(14).fill([]), ["ack-flush"]],
      "the later timer for the first, the turn's end once 16 wait",
    );
    assert.deepEqual(ackIds(steps), [], "nothing written before a timer fires");
    const flush = step(state, { kind: "timer", timer: "ack-flush" });
    assert.deepEqual(ackIds([flush]), ["17"]);
    assert.equal(flush.state.ackHeld, 0);
    // The later timer, still running, finds nothing left to write.
    assert.deepEqual(ackIds([step(flush.state, { kind: "timer", timer: "ack-later" })]), []);
  });

  it("cumulative acks: the later timer writes what waited when no more is stored", () => {
    const { state, steps } = when(
      sent(opened("gpu-a1", { cumulativeAcks: true }), 4),
      stored("2"),
      stored("3"),
    );
    assert.deepEqual(
      steps.map((s) => s.timers),
      [["ack-later"], []],
    );
    const later = step(state, { kind: "timer", timer: "ack-later" });
    assert.deepEqual(ackIds([later]), ["3"]);
    // The next stored message starts a new wait.
    const next = step(later.state, stored("4"));
    assert.deepEqual(next.timers, ["ack-later"]);
  });

  it("cumulative acks: once nothing more is on its way, the ack is written at the turn's end", () => {
    const { state, steps } = when(
      sent(opened("gpu-a1", { cumulativeAcks: true }), 2),
      stored("2"),
      stored("3"),
      message({ msg: { case: "shard", value: { shardId: "s1", replicaId: "r1" } } }),
      stored("4"),
    );
    assert.deepEqual(
      steps.map((s) => s.timers),
      [["ack-later"], ["ack-flush"], [], []],
    );
    assert.deepEqual(ackIds([step(state, { kind: "timer", timer: "ack-flush" })]), ["4"]);
  });

  it("an agent without cumulative acks is acked per message, whatever is on its way", () => {
    const { steps } = when(sent(opened("gpu-a1"), 8), stored("2"), stored("3"));
    assert.deepEqual(ackIds(steps), ["2", "3"]);
    assert.deepEqual(
      steps.map((s) => s.timers),
      [[], []],
    );
  });

  it("the agent closing its side acknowledges what is stored before the stream ends OK", () => {
    const { steps } = when(sent(opened("gpu-a1", { cumulativeAcks: true }), 1), stored("2"), {
      kind: "stream-ended",
    });
    const last = steps[1]!;
    assert.equal(last.close?.kind, "disconnected");
    assert.equal(closeOutcome(last.close).code, undefined);
    assert.deepEqual(
      last.replies.map((x) => x.kind),
      ["cumulative-ack"],
    );
  });
});

describe("session core: closing", () => {
  it("maps each way a session ends to its SessionClosed reason and Connect code, in one place", () => {
    const cases: Array<[Input, SessionClosed_Reason, Code | undefined]> = [
      [{ kind: "timer", timer: "read-deadline" }, SessionClosed_Reason.SILENT, Code.DeadlineExceeded],
      [{ kind: "disconnected" }, SessionClosed_Reason.DISCONNECTED, undefined],
      [{ kind: "superseded", byGateway: "gw-2" }, SessionClosed_Reason.SUPERSEDED, Code.Aborted],
      [{ kind: "drain", reason: "bye", retryAfterMs: 5 }, SessionClosed_Reason.GATEWAY_DRAINING, undefined],
      [{ kind: "drain-deadline", detail: "late" }, SessionClosed_Reason.GATEWAY_DRAINING, Code.Unavailable],
      [{ kind: "send-queue-full", behind: 9 }, SessionClosed_Reason.SLOW_CONSUMER, Code.ResourceExhausted],
      [
        { kind: "log-failed", unavailable: true, detail: "x" },
        SessionClosed_Reason.LOG_UNAVAILABLE,
        Code.Unavailable,
      ],
      [
        { kind: "log-failed", unavailable: false, detail: "x" },
        SessionClosed_Reason.PROTOCOL_ERROR,
        Code.Internal,
      ],
      [
        { kind: "stream-failed", code: Code.ResourceExhausted, detail: "too big", aborted: false },
        SessionClosed_Reason.PROTOCOL_ERROR,
        Code.ResourceExhausted,
      ],
      [
        { kind: "stream-failed", code: Code.InvalidArgument, detail: "x", aborted: true },
        SessionClosed_Reason.DISCONNECTED,
        undefined,
      ],
      [
        { kind: "stream-failed", code: Code.Canceled, detail: "x", aborted: false },
        SessionClosed_Reason.DISCONNECTED,
        undefined,
      ],
      [
        { kind: "close", close: { kind: "expired", detail: "lease lapsed" } },
        SessionClosed_Reason.EXPIRED,
        Code.Unavailable,
      ],
    ];
    for (const [input, reason, code] of cases) {
      const r = step(opened(), input);
      assert.ok(r.close, input.kind);
      // Only a close for what the agent sent writes what was queued before it.
      const dropsQueued = !(input.kind === "stream-failed" && closeOutcome(r.close).code !== undefined);
      assert.deepEqual(
        closeOutcome(r.close),
        { reason, code, dropsQueued },
        `${input.kind}: ${r.close.detail}`,
      );
      assert.equal(r.state.phase, "closing");
    }
  });

  it("draining tells the agent to reconnect before the stream ends", () => {
    const r = step(opened(), { kind: "drain", reason: "upgrade", retryAfterMs: 250 });
    const m = r.replies[0]?.message.msg;
    assert.ok(m?.case === "reconnect" && m.value.reason === "upgrade" && m.value.retryAfterMs === 250);
  });

  it("closes once: whatever comes after the first close changes nothing", () => {
    const { steps } = when(
      opened(),
      { kind: "superseded", byGateway: "gw-2" },
      { kind: "drain", reason: "bye", retryAfterMs: 1 },
      message({ msg: { case: "shard", value: { shardId: "s1", replicaId: "r1" } } }),
      stored("2"),
    );
    assert.deepEqual(
      closes(steps).map((c) => c.kind),
      ["superseded"],
    );
    assert.deepEqual(
      steps.slice(1).flatMap((s) => [...s.events, ...s.replies]),
      [],
    );
  });
});

describe("session core: shard load in the coalesced usage events", () => {
  const hb = (load: Array<{ shardId: string; queueDepth: number; kvCacheUse?: number }>, memoryMb?: number) =>
    message({
      msg: {
        case: "heartbeat",
        value: {
          shardLoad: load.map((l) => ({ kvCacheUse: 0.5, ...l })),
          ...(memoryMb === undefined
            ? {}
            : { gpuMemoryUsedMb: Array.from({ length: 8 }, () => BigInt(memoryMb)) }),
        },
      },
    });
  const loadOf = (r: StepResult) =>
    r.events.flatMap((e) =>
      e.body.case === "usageChanged"
        ? [(e.body.value.shardLoad ?? []).map((l) => [l.shardId, l.queueDepth])]
        : [],
    );

  it("writes load at once, then at most once per interval, the latest of it, and only when it moved past the thresholds", () => {
    // Heartbeats are a second apart; the interval is 3 s.
    const { steps } = when(
      opened(),
      hb([{ shardId: "s1", queueDepth: 10 }]),
      hb([{ shardId: "s1", queueDepth: 11 }]), // by less than 2: noise
      hb([{ shardId: "s1", queueDepth: 20 }]), // moved, but within the interval: waits
      hb([{ shardId: "s1", queueDepth: 24 }]), // merged: the latest wins
      { kind: "timer", timer: "usage-flush" },
      hb([{ shardId: "s1", queueDepth: 24, kvCacheUse: 0.52 }]), // KV cache by less than 0.05
    );
    assert.deepEqual(steps.map(loadOf), [[[["s1", 10]]], [], [], [], [[["s1", 24]]], []]);
    assert.deepEqual(steps[2]?.timers, ["usage-flush"]);
    assert.deepEqual(
      steps[3]?.notes.map((n) => n.kind),
      ["usage-coalesced"],
    );
  });

  it("an event written for memory alone does not repeat unchanged load; a shard that appears is news", () => {
    const { steps } = when(
      opened(),
      hb([{ shardId: "s1", queueDepth: 10 }]),
      { kind: "timer", timer: "usage-flush" },
      message({ msg: { case: "heartbeat", value: {} } }),
      message({ msg: { case: "heartbeat", value: {} } }),
      hb([{ shardId: "s1", queueDepth: 10 }], 40_000),
      message({ msg: { case: "heartbeat", value: {} } }),
      message({ msg: { case: "heartbeat", value: {} } }),
      message({ msg: { case: "heartbeat", value: {} } }),
      hb([
        { shardId: "s1", queueDepth: 10 },
        { shardId: "s2", queueDepth: 0 },
      ]),
    );
    const written = steps.flatMap(loadOf);
    assert.deepEqual(written, [
      [["s1", 10]],
      [],
      [
        ["s1", 10],
        ["s2", 0],
      ],
    ]);
  });

  it("refuses a heartbeat whose load is malformed, naming the field", () => {
    const cases: Array<[AgentMessageInit, RegExp]> = [
      [
        { msg: { case: "heartbeat", value: { shardLoad: [{ shardId: "s1", kvCacheUse: 1.5 }] } } },
        /heartbeat\.shard_load\[0\]\.kv_cache_use is 1\.5/,
      ],
      [
        { msg: { case: "heartbeat", value: { shardLoad: [{ shardId: "s1" }, { shardId: "s1" }] } } },
        /heartbeat\.shard_load\[1\]\.shard_id: shard "s1" is listed twice/,
      ],
      [
        { msg: { case: "heartbeat", value: { shardLoad: [{ shardId: "" }] } } },
        /shard_load\[0\]\.shard_id is empty/,
      ],
      [
        { msg: { case: "heartbeat", value: { shardLoad: [{ shardId: "__proto__" }] } } },
        /shard_load\[0\]\.shard_id/,
      ],
    ];
    for (const [init, why] of cases) {
      const r = step(opened(), message(init));
      assert.equal(r.close?.kind, "protocol-error");
      assert.match(r.close?.detail ?? "", why);
      assert.deepEqual(r.events, []);
    }
  });
});

describe("session core: step never changes the state it is given", () => {
  /** Freezes `v` and everything it holds (a Set or Map's entries cannot be frozen: the clone compare covers them). */
  function deepFreeze(v: unknown): void {
    if (typeof v !== "object" || v === null || Object.isFrozen(v)) return;
    Object.freeze(v);
    if (v instanceof Set) for (const x of v) deepFreeze(x);
    else if (v instanceof Map) for (const [k, x] of v) deepFreeze([k, x]);
    else for (const x of Object.values(v)) deepFreeze(x);
  }

  const shard = (shardId: string, lastOutput = "") =>
    message({ msg: { case: "shard", value: { shardId, replicaId: "r1", lastOutput } } });
  const heartbeat = (value: Record<string, unknown>) => message({ msg: { case: "heartbeat", value } });
  const load = (queueDepth: number) => [{ shardId: "s1", queueDepth, kvCacheUse: 0.5 }];
  /** An open session's inputs of every kind that keeps it open, in an order that exercises each path. */
  const OPEN_INPUTS = (): Input[] => [
    shard("s1"),
    shard("s2", "x".repeat(10_000)),
    message({ msg: { case: "result", value: { commandId: "c1", ok: true } } }),
    heartbeat({ newProblems: ["Xid 79"] }),
    heartbeat({ newProblems: ["Xid 79", "Xid 48"], gpuMemoryUsedMb: Array(8).fill(70_000n) }),
    heartbeat({
      gpuProblems: [
        { gpuIndex: 0, kind: 1, message: "ecc" },
        { gpuIndex: 99, kind: 1, message: "?" },
      ],
    }),
    heartbeat({ shardLoad: load(2) }),
    heartbeat({ shardLoad: load(40) }),
    { kind: "timer", timer: "usage-flush" },
    message(registration("gpu-a1", { cumulativeAcks: true })),
    heartbeat({ newProblems: Array.from({ length: 250 }, (_, i) => `p${i}`) }),
    message({}),
    stored("2"),
    stored("3"),
    { kind: "timer", timer: "ack-later" },
    stored("4"),
    { kind: "timer", timer: "ack-flush" },
    { kind: "timer", timer: "usage-flush" },
  ];
  /** Inputs that close a session, each tried on the states along the way. */
  const CLOSING: Input[] = [
    { kind: "stream-ended" },
    { kind: "stream-failed", code: Code.InvalidArgument, detail: "bad", aborted: false },
    { kind: "log-failed", unavailable: true, detail: "down" },
    { kind: "timer", timer: "read-deadline" },
    { kind: "disconnected" },
    { kind: "superseded", byGateway: "gw-2" },
    { kind: "drain", reason: "bye", retryAfterMs: 5 },
    { kind: "drain-deadline", detail: "late" },
    { kind: "send-queue-full", behind: 9 },
    { kind: "close", close: { kind: "revoked", detail: "revoked" } },
    {
      kind: "close",
      close: { kind: "refused", code: Code.ResourceExhausted, detail: "again", retryAfterMs: 5 },
    },
  ];

  /** Steps `state` with `input` twice, frozen: it is unchanged, and both steps give the same result. */
  function stepFrozen(state: SessionState, input: Input): StepResult {
    deepFreeze(state);
    const before = structuredClone(state);
    const r = step(state, input);
    assert.deepStrictEqual(state, before, `step(${input.kind}) changed the state it was given`);
    assert.deepStrictEqual(step(state, input), r, `step(${input.kind}) twice on one state differs`);
    return r;
  }

  it("from the Register to the close, through every message kind, timer and close", () => {
    let state = initialState(CONFIG, verified("gpu-a1"), SESSION);
    const path: Input[] = [
      message(registration("gpu-a1", { cumulativeAcks: true })),
      { kind: "admitted" },
      stored("register"),
      ...OPEN_INPUTS(),
    ];
    const seen = new Set<string>();
    let onTheWay = 0;
    for (const input of path) {
      for (const close of CLOSING) {
        const r = stepFrozen(state, close);
        seen.add(`${state.phase} ${close.kind}`);
        stepFrozen(r.state, shard("s9")); // and a closed state stays as it is
      }
      const r = stepFrozen(state, input);
      assert.equal(r.close, undefined, `${input.kind} closed the session: ${r.close?.detail}`);
      seen.add(`${state.phase} ${input.kind}`);
      // Every acked event drafted is on its way until its `stored` input.
      onTheWay += r.events.filter((e) => e.ackId !== undefined).length - (input.kind === "stored" ? 1 : 0);
      assert.equal(r.state.onTheWay, onTheWay, `on their way after ${input.kind}`);
      state = r.state;
    }
    assert.equal(onTheWay, 1, "the re-registration's event is still on its way");
    assert.equal(state.phase, "open");
    assert.ok(state.usage && state.usage.problems.size >= 250, "the baseline grew by new values");
    for (const phase of ["registering", "admitting", "opening", "open"])
      assert.ok(seen.has(`${phase} disconnected`));
  });
});

describe("session core: the hostile inputs of hostile.test.ts", () => {
  for (const [what, reg, detail] of [...MANY_FIELDS, ...DUPLICATES]) {
    it(`refuses a registration with ${what} (InvalidArgument naming the field)`, () => {
      const r = step(
        initialState(CONFIG, verified("gpu-x"), SESSION),
        message({ msg: { case: "register", value: reg("gpu-x") } }),
      );
      assert.equal(r.close?.kind, "refused");
      assert.equal(closeOutcome(r.close).code, Code.InvalidArgument);
      assert.match(r.close.detail, detail);
      assert.deepEqual(r.events, []);
    });
  }

  for (const [what, id] of ODD_NODE_IDS) {
    it(`refuses a node id with ${what} (InvalidArgument, with and without TLS)`, () => {
      for (const [peer, insecureDev] of [
        [{ kind: "plaintext" }, true],
        [verified(id), false],
      ] as const) {
        const r = step(initialState({ ...CONFIG, insecureDev }, peer, SESSION), message(registration(id)));
        assert.equal(r.close?.kind, "refused", peer.kind);
        assert.equal(closeOutcome(r.close).code, Code.InvalidArgument, peer.kind);
        assert.match(r.close.detail, /node_id/);
        assert.ok(r.close.detail.length < 400, `${r.close.detail.length} characters`);
      }
    });
  }

  const afterRegister: Array<[string, (node: string) => AgentMessageInit, RegExp]> = [
    ...RESERVED_IDS,
    ...BAD_ENDPOINTS.map(([what, endpoint, detail]): [string, (node: string) => AgentMessageInit, RegExp] => [
      `a shard status whose endpoint is ${what}`,
      () => ({ msg: { case: "shard", value: { replicaId: "r1", shardId: "s1", endpoint } } }),
      detail,
    ]),
  ];
  for (const [what, init, detail] of afterRegister) {
    it(`ends the session on ${what} (PROTOCOL_ERROR, InvalidArgument), recording nothing of it`, () => {
      const r = step(opened("gpu-x"), message(init("gpu-x")));
      assert.ok(r.close);
      assert.deepEqual(closeOutcome(r.close), {
        reason: SessionClosed_Reason.PROTOCOL_ERROR,
        code: Code.InvalidArgument,
        dropsQueued: false,
      });
      assert.match(r.close.detail, detail);
      assert.deepEqual(r.events, []);
    });
  }
});

const ITERATIONS = Number(process.env["LLMGW_FUZZ_ITERATIONS"] ?? 240) * 10;
const SEED = Number(process.env["LLMGW_FUZZ_SEED"] ?? Math.floor(Math.random() * 2 ** 31));
const NODE = "gpu-fuzz";

/**
 * The messages a stream body decodes to, up to the first frame the
 * protocol layer would refuse (a flag, a length past the end, bytes that do
 * not decode): that one ends the stream before the core sees it.
 */
function decodeFrames(body: Buffer, codec: "proto" | "json"): AgentMessage[] {
  const out: AgentMessage[] = [];
  for (let at = 0; at + 5 <= body.length; ) {
    const flags = body.readUInt8(at);
    const length = body.readUInt32BE(at + 1);
    if (flags !== 0 || at + 5 + length > body.length) break;
    const payload = body.subarray(at + 5, at + 5 + length);
    try {
      out.push(
        codec === "json"
          ? fromJsonString(AgentMessageSchema, payload.toString("utf8"))
          : fromBinary(AgentMessageSchema, payload),
      );
    } catch {
      break;
    }
    at += 5 + length;
  }
  return out;
}

describe("session core: the seeded fuzzing of fuzz.test.ts", () => {
  it(`ends every fuzzed stream with a code an agent can act on, making only well-formed events (${ITERATIONS} streams)`, (t) => {
    const fuzz = new Fuzzer(SEED, NODE);
    const seen = new Map<string, number>();
    for (let i = 0; i < ITERATIONS; i++) {
      const { what, body, codec } = fuzz.next();
      const replay = `rerun with LLMGW_FUZZ_SEED=${SEED}: stream ${i} (${what}, ${body.subarray(0, 48).toString("hex")}…)`;
      let state = initialState(CONFIG, verified(NODE), `fuzz-${i}`);
      const inputs: Input[] = [
        ...decodeFrames(body, codec).map(
          (m): Input => ({ kind: "message", message: m, draining: false, at: 0 }),
        ),
        { kind: "stream-ended" },
      ];
      let close: Close | undefined;
      for (const input of inputs) {
        let r: StepResult;
        try {
          r = step(state, input);
        } catch (err) {
          throw new Error(`${replay}: step threw on ${input.kind}: ${(err as Error).message}`);
        }
        state = r.state;
        close ??= r.close;
        if (state.phase === "admitting") r = step(state, { kind: "admitted" });
        state = r.state;
        for (const e of r.events) {
          const event = decodeEvent(encodeEvent(gatewayEvent(CONFIG.gatewayId, e.id, e.body)));
          assert.equal(nodeOf({ seq: 1, timeMs: 0, subject: "", event }), NODE, `${replay}: ${e.body.case}`);
          if (e.ackId !== undefined) state = step(state, stored(e.ackId)).state;
        }
      }
      assert.ok(close, `${replay}: the stream ended without a close`);
      const code = codeName(close);
      assert.ok(
        ["OK", "InvalidArgument", "PermissionDenied"].includes(code),
        `${replay}: ${code}: ${close.detail}`,
      );
      seen.set(code, (seen.get(code) ?? 0) + 1);
    }
    t.diagnostic(`seed ${SEED}: ${[...seen].map(([c, n]) => `${c} ${n}`).join(", ")}`);
    assert.ok((seen.get("InvalidArgument") ?? 0) > 0, `seed ${SEED}: ${JSON.stringify([...seen])}`);
    assert.ok((seen.get("OK") ?? 0) > 0, `seed ${SEED}: ${JSON.stringify([...seen])}`);
  });
});
