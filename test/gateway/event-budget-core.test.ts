/**
 * The session core's defence against an agent flooding the log, without
 * NATS or streams: usage events coalesced to one per usage interval (the
 * latest values winning, a withheld value written at the interval's end or
 * at the close), repeated problems writing nothing, new problems bounded per
 * interval, and the per-session event budget closing the session with
 * EVENT_BUDGET / ResourceExhausted. Time is an input: a clock of the test's
 * drives the messages and fires the `usage-flush` timer when it is due,
 * as the shell does.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import type { HeartbeatInit } from "../../src/agent/client/connection.js";
import {
  type CoreConfig,
  closeOutcome,
  type EventDraft,
  type Input,
  initialState,
  LIMITS,
  type SessionState,
  type StepResult,
  step,
  usageFlushDelayMs,
} from "../../src/gateway/session-core/index.js";
import { AgentMessageSchema, GpuProblem_Kind, ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { SessionClosed_Reason, UsageChangedSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import { coreConfig } from "../support/core-config.js";
import type { AgentMessageInit } from "../support/hostile-cases.js";
import { h100Registration } from "../support/sample-events.js";

const INTERVAL = 3_000;
const CONFIG = coreConfig({
  usageIntervalMs: INTERVAL,
  eventBudget: { perMinute: 1_000_000, burst: 1_000_000 },
});
const NODE = "gpu-a1";
const SESSION = "0b5e55ed-0000-4000-8000-00000000000b";
const mib = (n: number) => Array(8).fill(BigInt(n)) as bigint[];

/**
 * One session driven by a clock: `send` reads a message at `now`, firing
 * first the usage flush if it came due; every step's events are kept.
 */
class Driven {
  now = 0;
  state: SessionState;
  readonly events: EventDraft[] = [];
  readonly steps: StepResult[] = [];
  #due: number | undefined;

  constructor(config: CoreConfig = CONFIG) {
    this.state = initialState(config, { kind: "verified", commonName: NODE }, SESSION);
    this.#input({ kind: "message", message: register(), draining: false, at: this.now });
    this.#input({ kind: "admitted" });
    this.#input({ kind: "stored", messageId: "register", seq: 1 });
    assert.equal(this.state.phase, "open");
  }

  heartbeat(value: HeartbeatInit, at = this.now + 1): StepResult {
    return this.send({ msg: { case: "heartbeat", value } }, at);
  }

  send(init: AgentMessageInit, at: number): StepResult {
    this.advance(at);
    return this.#input({ kind: "message", message: create(AgentMessageSchema, init), draining: false, at });
  }

  /** The clock moves to `at`: the flush timer fires if it is due by then. */
  advance(at: number): void {
    if (this.#due !== undefined && this.#due <= at) {
      this.now = this.#due;
      this.#due = undefined;
      this.#input({ kind: "timer", timer: "usage-flush" });
    }
    this.now = at;
  }

  input(input: Input): StepResult {
    return this.#input(input);
  }

  usage() {
    return usageOf(this.events);
  }

  #input(input: Input): StepResult {
    const r = step(this.state, input);
    this.state = r.state;
    this.steps.push(r);
    this.events.push(...r.events.filter((e) => e.body.case !== "sessionOpened"));
    if (r.timers.includes("usage-flush")) this.#due = this.now + usageFlushDelayMs(r.state, this.now);
    return r;
  }
}

function usageOf(events: readonly EventDraft[]) {
  return events.flatMap((e) =>
    e.body.case === "usageChanged" ? [create(UsageChangedSchema, e.body.value)] : [],
  );
}

function register() {
  return create(AgentMessageSchema, { msg: { case: "register", value: h100Registration(NODE) } });
}

describe("usage events coalesced per session", () => {
  it("memory alternating 0 / 5,000 MiB on 20,000 heartbeats: one event per interval at most", () => {
    const s = new Driven();
    for (let i = 1; i <= 20_000; i++) s.heartbeat({ gpuMemoryUsedMb: mib(i % 2 === 1 ? 5_000 : 0) }, i);
    const elapsed = s.now;
    const usage = s.usage();
    assert.ok(usage.length >= 1, "the first move is written at once");
    assert.ok(
      usage.length <= Math.floor(elapsed / INTERVAL) + 1,
      `${usage.length} usage events in ${elapsed} ms at one per ${INTERVAL} ms`,
    );
    const ids = s.events.map((e) => e.id);
    assert.equal(new Set(ids).size, ids.length, "every event has its own id");
  });

  it("a value withheld reaches the log at the end of the interval when it differs from what the log has", () => {
    const s = new Driven();
    s.heartbeat({ gpuMemoryUsedMb: mib(5_000) }, 10); // written at once
    s.heartbeat({ gpuMemoryUsedMb: mib(0) }, 20); // withheld
    assert.equal(s.usage().length, 1);
    assert.deepEqual(s.steps.at(-1)?.notes, [{ kind: "usage-coalesced" }]);
    s.heartbeat({ gpuMemoryUsedMb: mib(40_000) }, 30); // withheld; the latest wins
    s.advance(10 + INTERVAL);
    assert.deepEqual(
      s.usage().map((u) => [u.sessionSeq, u.gpuMemoryUsedMb[0]]),
      [
        [2n, 5_000n],
        [4n, 40_000n],
      ],
    );
    assert.equal(s.events.at(-1)?.id, `${SESSION}-4`, "numbered after the heartbeat it tells");
  });

  it("a withheld value back at what the log has writes nothing at the end of the interval", () => {
    const s = new Driven();
    s.heartbeat({ gpuMemoryUsedMb: mib(5_000) }, 10);
    s.heartbeat({ gpuMemoryUsedMb: mib(0) }, 20);
    s.heartbeat({ gpuMemoryUsedMb: mib(5_000) }, 30);
    s.advance(10 + INTERVAL);
    assert.equal(s.usage().length, 1);
  });

  it("a heartbeat past the interval is written at once", () => {
    const s = new Driven();
    s.heartbeat({ gpuMemoryUsedMb: mib(5_000) }, 10);
    s.heartbeat({ gpuMemoryUsedMb: mib(20_000) }, 10 + INTERVAL);
    assert.equal(s.usage().length, 2);
    assert.deepEqual(s.steps.at(-1)?.timers, []);
  });

  it("a problem already reported writes nothing; a new one in every heartbeat makes one event per interval", () => {
    const s = new Driven();
    for (let i = 0; i < 100; i++) s.heartbeat({ newProblems: ["Xid 79: GPU has fallen off the bus"] });
    assert.equal(s.usage().length, 1, "the repeated problem is recorded once");
    for (let i = 0; i < 20_000; i++) s.heartbeat({ newProblems: [`Xid 13: invented ${i}`] });
    const elapsed = s.now;
    s.input({ kind: "stream-ended" }); // what still waits is written at the close
    const usage = s.usage();
    assert.ok(usage.length <= Math.floor(elapsed / INTERVAL) + 2, `${usage.length} events in ${elapsed} ms`);
    for (const u of usage)
      assert.ok(u.newProblems.length <= LIMITS.problems, "an event says what a heartbeat may");
    const dropped = s.steps
      .flatMap((r) => r.notes)
      .reduce((n, note) => n + (note.kind === "problems-dropped" ? note.count : 0), 0);
    assert.equal(
      usage.flatMap((u) => u.newProblems).length + dropped,
      20_001,
      "each new problem recorded or counted",
    );
  });

  it("past an interval's bound of GPU problems, a GPU with none in it yet is still reported", () => {
    const s = new Driven();
    s.heartbeat({ gpuMemoryUsedMb: mib(5_000) }, 1); // opens an interval
    const gpu0 = Array.from({ length: LIMITS.problems }, (_, i) => ({
      gpuIndex: 0,
      kind: GpuProblem_Kind.XID,
      message: `Xid 13 #${i}`,
    }));
    s.heartbeat({ gpuProblems: gpu0 }, 2);
    s.heartbeat(
      {
        gpuProblems: [
          { gpuIndex: 0, kind: GpuProblem_Kind.XID, message: "Xid 13 one too many" },
          { gpuIndex: 5, kind: GpuProblem_Kind.ECC, message: "uncorrectable ECC" },
        ],
      },
      3,
    );
    s.advance(1 + INTERVAL);
    const last = s.usage().at(-1);
    assert.equal(last?.gpuProblems.length, LIMITS.problems + 1);
    assert.ok(last?.gpuProblems.some((p) => p.gpuIndex === 5));
    assert.deepEqual(
      s.steps.flatMap((r) => r.notes).filter((n) => n.kind === "problems-dropped"),
      [{ kind: "problems-dropped", count: 1 }],
    );
  });

  it("the close writes the reading still waiting, before the session-closed event", () => {
    const s = new Driven();
    s.heartbeat({ gpuMemoryUsedMb: mib(5_000) }, 10);
    s.heartbeat({ gpuMemoryUsedMb: mib(30_000), newProblems: ["thermal"] }, 20);
    const r = s.input({ kind: "stream-ended" });
    assert.equal(r.close?.kind, "disconnected");
    assert.deepEqual(
      usageOf(r.events).map((u) => [u.sessionSeq, u.gpuMemoryUsedMb[0], u.newProblems]),
      [[3n, 30_000n, ["thermal"]]],
    );
    assert.equal(r.events[0]?.id, `${SESSION}-3`);
  });

  it("a superseded session writes nothing more: the newer session's registration is the truth", () => {
    const s = new Driven();
    s.heartbeat({ gpuMemoryUsedMb: mib(5_000) }, 10);
    s.heartbeat({ gpuMemoryUsedMb: mib(30_000) }, 20);
    const r = s.input({ kind: "superseded", byGateway: "gw-2" });
    assert.deepEqual(r.events, []);
  });

  it("a re-registration drops the memory waiting (its figures are the baseline) and keeps new problems", () => {
    const s = new Driven();
    s.heartbeat({ gpuMemoryUsedMb: mib(5_000) }, 10);
    s.heartbeat({ gpuMemoryUsedMb: mib(30_000), newProblems: ["thermal"] }, 20);
    s.send({ msg: { case: "register", value: h100Registration(NODE) } }, 30);
    s.advance(10 + INTERVAL);
    const last = s.usage().at(-1);
    assert.deepEqual(last?.gpuMemoryUsedMb, []);
    assert.deepEqual(last?.newProblems, ["thermal"]);
  });
});

describe("per-session event budget", () => {
  const small: CoreConfig = { ...CONFIG, eventBudget: { perMinute: 60, burst: 5 } };
  const status = (i: number) => ({
    msg: { case: "shard" as const, value: { shardId: `s-${i}`, state: ShardStatus_State.RUNNING } },
  });

  it("closes the session past its burst with EVENT_BUDGET / ResourceExhausted, writing nothing of the step", () => {
    const s = new Driven(small);
    for (let i = 0; i < 5; i++) assert.equal(s.send(status(i), 100 + i).close, undefined);
    const r = s.send(status(5), 106);
    assert.equal(r.close?.kind, "event-budget");
    assert.deepEqual(r.events, []);
    assert.deepEqual(closeOutcome(r.close), {
      reason: SessionClosed_Reason.EVENT_BUDGET,
      code: Code.ResourceExhausted,
      dropsQueued: false,
    });
    assert.match(r.close.detail, /budget of 60 a minute \(burst 5\)/);
    assert.equal(s.events.length, 5);
  });

  it("refills at its rate: one event a second at 60 a minute is within it for ever", () => {
    const s = new Driven(small);
    for (let i = 0; i < 1_000; i++) assert.equal(s.send(status(i), 1_000 * (i + 1)).close, undefined);
  });

  it("usage flushes are paid for, as of the end of their interval", () => {
    const s = new Driven({ ...CONFIG, eventBudget: { perMinute: 1, burst: 1 } });
    s.heartbeat({ gpuMemoryUsedMb: mib(5_000) }, 10);
    s.heartbeat({ gpuMemoryUsedMb: mib(30_000) }, 20);
    s.advance(10 + INTERVAL);
    assert.equal(s.steps.at(-1)?.close?.kind, "event-budget");
    assert.equal(s.usage().length, 1);
  });

  it("a session closed for its budget does not write the reading still waiting", () => {
    const s = new Driven({ ...CONFIG, eventBudget: { perMinute: 1, burst: 2 } });
    s.heartbeat({ gpuMemoryUsedMb: mib(5_000) }, 10);
    s.heartbeat({ gpuMemoryUsedMb: mib(30_000) }, 20); // waits
    s.send(status(0), 30);
    const r = s.send(status(1), 40);
    assert.equal(r.close?.kind, "event-budget");
    assert.deepEqual(r.events, []);
  });
});
