/**
 * The relay's side of undeliverable commands, without a stream: which
 * commands it reports (for sessions this gateway held), which it drops in
 * silence (sessions it never held), and that each command attempt is
 * reported once. The end-to-end path is test/gateway/undeliverable.test.ts.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { pino } from "pino";
import { ENDED_SESSIONS_TTL_MS, EndedSessions } from "../../src/gateway/ended-sessions.js";
import { GatewayMetrics } from "../../src/gateway/metrics.js";
import { SessionRegistry } from "../../src/gateway/registry.js";
import { CommandRelay } from "../../src/gateway/relay.js";
import type { AgentSession } from "../../src/gateway/session.js";
import type { PushResult } from "../../src/gateway/writer.js";
import {
  type Command,
  CommandSchema,
  CommandUndeliverable_Action,
  CommandUndeliverable_Reason,
  type Event,
} from "../../src/gen/llmgw/v1/events_pb.js";

function setup() {
  const registry = new SessionRegistry();
  const metrics = new GatewayMetrics();
  const appended: Event[] = [];
  const relay = new CommandRelay(registry, metrics, pino({ level: "silent" }), "gw-a", async (e) => {
    appended.push(e);
  });
  const reports = () =>
    appended.flatMap((e) => (e.body.case === "commandUndeliverable" ? [e.body.value] : []));
  const dropped = async (reason: string) =>
    (await metrics.commandsDropped.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;
  return { registry, relay, appended, reports, dropped };
}

/** A held session as the relay sees it: its ids, whether it is closing, and what a send returns. */
function held(sessionId: string, nodeId: string, opts: { closing?: string; push?: PushResult } = {}) {
  return {
    sessionId,
    nodeId,
    closing: opts.closing !== undefined,
    closeDetail: opts.closing ?? "",
    deliver: () => opts.push ?? "queued",
  } as unknown as AgentSession;
}

function start(commandId: string, nodeId: string, sessionId: string, attempt = 1): Command {
  return create(CommandSchema, {
    commandId,
    nodeId,
    sessionId,
    attempt,
    replicaId: "r-1",
    action: { case: "start", value: { commandId, shardId: "r-1-s0", replicaId: "r-1", gpuIndices: [0] } },
  });
}

describe("command relay: undeliverable commands", () => {
  it("drops a command for a session this gateway never held, silently", async () => {
    const t = setup();
    t.relay.relay(start("c-1", "gpu-1", "s-elsewhere"), 10);
    assert.deepEqual(t.appended, []);
    assert.equal(await t.dropped("not_held"), 1);
  });

  it("reports a command for a session this gateway held that has ended, once per command attempt", async () => {
    const t = setup();
    t.relay.sessionEnded({ sessionId: "s-1", nodeId: "gpu-1", closeDetail: "the connection ended" });
    t.relay.relay(start("c-1", "gpu-1", "s-1"), 10);
    t.relay.relay(start("c-1", "gpu-1", "s-1"), 11);
    t.relay.relay(start("c-1", "gpu-1", "s-1", 2), 12);
    assert.deepEqual(
      t.reports().map((r) => [r.commandId, r.attempt, r.reason, r.action, Number(r.passSeq)]),
      [
        ["c-1", 1, CommandUndeliverable_Reason.SESSION_CLOSED, CommandUndeliverable_Action.START, 10],
        ["c-1", 2, CommandUndeliverable_Reason.SESSION_CLOSED, CommandUndeliverable_Action.START, 12],
      ],
    );
    const [first] = t.reports();
    assert.equal(first?.detail, "session s-1 of gpu-1 ended on gateway gw-a: the connection ended");
    assert.equal(first?.gatewayId, "gw-a");
    assert.equal(first?.shardId, "r-1-s0");
    assert.equal(first?.replicaId, "r-1");
    assert.equal(t.appended[0]?.id, "s-1-undeliverable-c-1-1", "one message id per command attempt");
    assert.equal(await t.dropped("session_closed"), 3);
  });

  it("reads the time from its clock: the ended session's TTL and the report's time", async () => {
    const registry = new SessionRegistry();
    const metrics = new GatewayMetrics();
    const appended: Event[] = [];
    let now = 1_800_000_000_000;
    const relay = new CommandRelay(
      registry,
      metrics,
      pino({ level: "silent" }),
      "gw-a",
      async (e) => {
        appended.push(e);
      },
      () => now,
    );
    relay.sessionEnded({ sessionId: "s-1", nodeId: "gpu-1", closeDetail: "" });
    now += ENDED_SESSIONS_TTL_MS - 1;
    relay.relay(start("c-1", "gpu-1", "s-1"), 10);
    assert.equal(appended.length, 1);
    assert.equal(appended[0]?.timeUnixMs, BigInt(now));
    now += 1;
    relay.relay(start("c-1", "gpu-1", "s-1", 2), 11);
    assert.equal(appended.length, 1, "past the TTL the ended session is forgotten: dropped as never held");
  });

  it("a session id that ended for another node is not this command's", () => {
    const t = setup();
    t.relay.sessionEnded({ sessionId: "s-1", nodeId: "gpu-1", closeDetail: "" });
    t.relay.relay(start("c-1", "gpu-2", "s-1"), 10);
    assert.deepEqual(t.appended, []);
  });

  it("reports a command for a session that is closing, or whose send queue is full", () => {
    const t = setup();
    t.registry.add(held("s-1", "gpu-1", { closing: "superseded by a newer session on gateway gw-b" }));
    t.registry.add(held("s-2", "gpu-2", { push: "full" }));
    t.registry.add(held("s-3", "gpu-3", { push: "closed" }));
    t.relay.relay(start("c-1", "gpu-1", "s-1"), 10);
    t.relay.relay(start("c-2", "gpu-2", "s-2"), 10);
    t.relay.relay(start("c-3", "gpu-3", "s-3"), 10);
    assert.deepEqual(
      t.reports().map((r) => [r.commandId, r.reason]),
      [
        ["c-1", CommandUndeliverable_Reason.SESSION_CLOSING],
        ["c-2", CommandUndeliverable_Reason.QUEUE_FULL],
        ["c-3", CommandUndeliverable_Reason.SESSION_CLOSING],
      ],
    );
    assert.match(t.reports()[0]?.detail ?? "", /closing on gateway gw-a: superseded by a newer session/);
  });

  it("relays a command to an open session and reports nothing", async () => {
    const t = setup();
    t.registry.add(held("s-1", "gpu-1"));
    t.relay.relay(start("c-1", "gpu-1", "s-1"), 10);
    assert.deepEqual(t.appended, []);
  });
});

describe("ended sessions record", () => {
  it("keeps the newest sessions, up to its size and age", () => {
    const ended = new EndedSessions(2, 1_000);
    ended.add("s-1", { nodeId: "n", detail: "", endedAtMs: 0 });
    ended.add("s-2", { nodeId: "n", detail: "", endedAtMs: 10 });
    ended.add("s-3", { nodeId: "n", detail: "", endedAtMs: 20 });
    assert.equal(ended.get("s-1", 20), undefined, "the oldest went when a third came");
    assert.equal(ended.get("s-2", 20)?.endedAtMs, 10);
    assert.equal(ended.get("s-2", 1_010), undefined, "too old");
    assert.equal(ended.get("s-3", 1_010)?.endedAtMs, 20);
    assert.equal(ended.size, 1);
  });
});
