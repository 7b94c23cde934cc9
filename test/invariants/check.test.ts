/**
 * The invariant checker, given events → violations, one rule at a time.
 * The clean history is a real one: the reconciler's decide over the fold,
 * its passes folded back and obeyed by the agents (test/support/fleet.ts).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import {
  CommandUndeliverable_Action,
  CommandUndeliverable_Reason,
  type Event,
  EventSchema,
  ReplicaFailed_Reason,
  Writer_Kind,
} from "../../src/gen/llmgw/v1/events_pb.js";
import { type CheckedEvent, checkLog, parseAckedList, type Violation } from "../../src/invariants/index.js";
import { fleetProjection, type Projection } from "../../src/projections/index.js";
import { Fleet, llama8b, llama70b } from "../support/fleet.js";

/** A converged fleet: two nodes, a catalog, every pass obeyed. */
function converged(): Fleet {
  const f = Fleet.of([llama70b(2), llama8b(2)], ["gpu-1", "gpu-2"]);
  f.advance(1000).run();
  return f;
}

const rules = (vs: Violation[]) => vs.map((v) => v.rule);

function startsOf(f: Fleet) {
  const out: Array<{ seq: number; replicaId: string; rank: number; shardId: string; nodeId: string }> = [];
  for (const r of f.events) {
    if (r.event.body.case !== "reconcilePass") continue;
    for (const c of r.event.body.value.commands)
      if (c.action.case === "start") out.push({ seq: r.seq, ...c.action.value, nodeId: c.nodeId });
  }
  return out;
}

/** A pass as the leader would append it, deciding on the log up to `observedSeq`. */
function pass(
  f: Fleet,
  body: { observedSeq?: number; commands?: unknown[]; decisions?: unknown[]; leader?: string },
): Event {
  return f.handPass((body.decisions ?? []) as never, {
    observedSeq: body.observedSeq,
    leaderId: body.leader ?? "rec-2",
    commands: (body.commands ?? []) as never,
  });
}

describe("checkLog", () => {
  it("passes a converged history, and counts what it read", () => {
    const f = converged();
    assert.ok(startsOf(f).length >= 4, "the history holds starts");
    const report = checkLog(f.events);
    assert.deepEqual(report.violations, []);
    assert.equal(report.events, f.events.length);
    assert.equal(report.sessions, 2);
    assert.ok(report.passes >= 1);
    assert.equal(report.lastSeq, f.state.seq);
  });

  it("passes the empty log", () => {
    assert.deepEqual(checkLog([]).violations, []);
  });

  it("slot-started-twice: a second shard in a slot whose shard still runs", () => {
    const f = converged();
    const first = startsOf(f)[0]!;
    const s = f.state.inventory.nodes.get("gpu-2")!.session!.sessionId;
    const bad = pass(f, {
      commands: [
        {
          commandId: "cmd-dup",
          nodeId: "gpu-2",
          sessionId: s,
          attempt: 1,
          action: {
            case: "start",
            value: { ...first, shardId: `${first.shardId}-again`, commandId: "cmd-dup", gpuIndices: [7] },
          },
        },
      ],
    });
    const vs = checkLog(f.events).violations;
    assert.deepEqual(rules(vs), ["slot-started-twice"]);
    assert.equal(vs[0]!.seq, f.state.seq);
    assert.match(vs[0]!.message, new RegExp(`slot ${first.replicaId}#${first.rank}`));
    assert.ok(bad.body.case === "reconcilePass");
  });

  it("slot-started-twice: not when the earlier shard failed first", () => {
    const f = converged();
    const first = startsOf(f)[0]!;
    f.shard(first.nodeId, first.replicaId, first.shardId, ShardStatus_State.FAILED, "CUDA out of memory");
    const s = f.state.inventory.nodes.get(first.nodeId)!.session!.sessionId;
    pass(f, {
      commands: [
        {
          commandId: "cmd-repl",
          nodeId: first.nodeId,
          sessionId: s,
          attempt: 1,
          action: {
            case: "start",
            value: { ...first, shardId: `${first.shardId}-b`, commandId: "cmd-repl" },
          },
        },
      ],
    });
    assert.deepEqual(checkLog(f.events).violations, []);
  });

  it("fencing: a pass decided on a log position before the previous pass", () => {
    const f = converged();
    const before = f.state.seq;
    pass(f, { leader: "rec-1" });
    pass(f, { leader: "rec-2", observedSeq: before });
    const vs = checkLog(f.events).violations;
    assert.deepEqual(rules(vs), ["fencing"]);
    assert.equal(vs[0]!.seq, f.state.seq);
    assert.match(vs[0]!.message, /rec-2 decided on the log up to \d+, before the previous pass at \d+/);
  });

  it("fencing: a pass that claims to have observed itself", () => {
    const f = converged();
    pass(f, { observedSeq: f.state.seq + 5 });
    assert.deepEqual(rules(checkLog(f.events).violations), ["fencing"]);
  });

  it("command-undeliverable: a report names a command an earlier pass issued and a session its gateway held, once", () => {
    const f = converged();
    const session = f.state.inventory.nodes.get("gpu-1")!.session!.sessionId;
    const stop = {
      commandId: "cmd-u",
      nodeId: "gpu-1",
      sessionId: session,
      attempt: 1,
      action: { case: "stop", value: { commandId: "cmd-u", shardId: "x" } },
    };
    pass(f, { commands: [stop] });
    f.disconnect("gpu-1");
    const report = (over: Record<string, unknown> = {}) =>
      f.apply({
        case: "commandUndeliverable",
        value: {
          commandId: "cmd-u",
          attempt: 1,
          nodeId: "gpu-1",
          sessionId: session,
          gatewayId: "gw-1",
          reason: CommandUndeliverable_Reason.SESSION_CLOSED,
          action: CommandUndeliverable_Action.STOP,
          shardId: "x",
          ...over,
        },
      });
    report();
    assert.deepEqual(checkLog(f.events).violations, []);
    report();
    report({ commandId: "cmd-never" });
    report({ attempt: 2 });
    report({ gatewayId: "gw-2" });
    const vs = checkLog(f.events).violations;
    // The last one is both a repeat and from a gateway that did not hold the session.
    assert.deepEqual(rules(vs), Array(5).fill("command-undeliverable"));
    assert.match(vs[0]!.message, /reported more than once/);
    assert.match(vs[1]!.message, /command cmd-never .* no earlier pass issued that command attempt/);
    assert.match(vs[2]!.message, /attempt 2.* no earlier pass issued/);
    assert.match(vs[3]!.message, new RegExp(`session ${session} was held by gateway gw-1`));
    assert.match(vs[4]!.message, /gateway gw-2 .* reported more than once/);
  });

  it("failure-reason: a failure's reason is backed by the shard's fact in the log", () => {
    const f = new Fleet({ crashBackoffBaseMs: 0 });
    f.connect("gpu-1");
    f.connect("gpu-2");
    f.connect("gpu-3");
    f.catalog(llama70b(1));
    f.advance(1000).settle();
    // Real failures, decided by decide over the fold: a refused start, then a crash after running.
    const [cmd] = Object.values(f.state.replicas.commands);
    f.result(cmd?.nodeId as string, cmd?.commandId as string, false, "no such image");
    f.run();
    const r = f.state.replicas.replicas.values()[0]!;
    const s = r.shards[0]!;
    f.shard(s.nodeId, r.replicaId, s.shardId, ShardStatus_State.FAILED, "NCCL error");
    f.run();
    assert.deepEqual(checkLog(f.events).violations, []);

    // A pass that blames a running shard for failing, and one that calls a running shard stuck STARTING.
    const now = f.state.replicas.replicas.values()[0]!;
    const live = now.shards[0]!;
    assert.equal(live.state, "running", "the replica runs on the third node");
    const forged = (reason: ReplicaFailed_Reason) =>
      pass(f, {
        leader: "rec-1",
        decisions: [
          {
            explanation: "forged",
            kind: {
              case: "replicaFailed",
              value: { replicaId: now.replicaId, shardId: live.shardId, nodeId: live.nodeId, reason },
            },
          },
        ],
      });
    forged(ReplicaFailed_Reason.SHARD_FAILED);
    const vs = checkLog(f.events).violations;
    assert.deepEqual(rules(vs), ["failure-reason"]);
    assert.match(vs[0]?.message ?? "", /as SHARD_FAILED, but the shard never reported FAILED/);
  });

  it("command-to-stale-session: a command for the session the node left", () => {
    const f = converged();
    const old = f.state.inventory.nodes.get("gpu-1")!.session!.sessionId;
    f.connect("gpu-1");
    pass(f, {
      commands: [
        {
          commandId: "cmd-stale",
          nodeId: "gpu-1",
          sessionId: old,
          attempt: 2,
          action: { case: "stop", value: { commandId: "cmd-stale", shardId: "x" } },
        },
      ],
    });
    const vs = checkLog(f.events).violations;
    assert.deepEqual(rules(vs), ["command-to-stale-session"]);
    assert.match(vs[0]!.message, new RegExp(`to session ${old} of gpu-1.*current session was`));
  });

  it("command-to-stale-session: not when the newer session opened after the state decided on", () => {
    const f = converged();
    const old = f.state.inventory.nodes.get("gpu-1")!.session!.sessionId;
    const observed = f.state.seq;
    f.connect("gpu-1");
    pass(f, {
      observedSeq: observed,
      commands: [
        {
          commandId: "cmd-race",
          nodeId: "gpu-1",
          sessionId: old,
          attempt: 1,
          action: { case: "stop", value: { commandId: "cmd-race", shardId: "x" } },
        },
      ],
    });
    assert.deepEqual(checkLog(f.events).violations, []);
  });

  it("command-to-stale-session: a command for a disconnected node", () => {
    const f = converged();
    const old = f.state.inventory.nodes.get("gpu-2")!.session!.sessionId;
    f.disconnect("gpu-2");
    pass(f, {
      commands: [
        {
          commandId: "cmd-gone",
          nodeId: "gpu-2",
          sessionId: old,
          attempt: 1,
          action: { case: "stop", value: { commandId: "cmd-gone", shardId: "x" } },
        },
      ],
    });
    const vs = checkLog(f.events).violations;
    assert.deepEqual(rules(vs), ["command-to-stale-session"]);
    assert.match(vs[0]!.message, /had no current session/);
  });

  it("one-current-session: a superseded session still writing long after the newer one", () => {
    const f = converged();
    const old = f.state.inventory.nodes.get("gpu-1")!.session!.sessionId;
    f.connect("gpu-1");
    f.advance(2_000);
    f.apply({
      case: "usageChanged",
      value: { nodeId: "gpu-1", sessionId: old, sessionSeq: 99n, gpuMemoryUsedMb: [1n] },
    });
    assert.deepEqual(checkLog(f.events).violations, [], "inside the grace period: in-flight events");
    f.advance(20_000);
    f.apply({
      case: "usageChanged",
      value: { nodeId: "gpu-1", sessionId: old, sessionSeq: 100n, gpuMemoryUsedMb: [2n] },
    });
    const vs = checkLog(f.events).violations;
    assert.deepEqual(rules(vs), ["one-current-session"]);
    assert.equal(vs[0]!.seq, f.state.seq);
    assert.match(vs[0]!.message, /two sessions live at once/);
    assert.deepEqual(checkLog(f.events, { supersedeGraceMs: 60_000 }).violations, []);
  });

  it("one-current-session: a session id opened twice, and facts of a session that never opened", () => {
    const f = converged();
    const s = f.state.inventory.nodes.get("gpu-1")!.session!.sessionId;
    f.apply({
      case: "sessionOpened",
      value: { nodeId: "gpu-1", sessionId: s, gatewayId: "gw-1", identity: "mtls" },
    });
    f.apply({
      case: "shardStatus",
      value: { nodeId: "gpu-2", sessionId: "nope", sessionSeq: 2n, status: { shardId: "a", replicaId: "b" } },
    });
    const vs = checkLog(f.events).violations;
    assert.deepEqual(rules(vs), ["one-current-session", "one-current-session"]);
    assert.match(vs[0]!.message, /opened again/);
    assert.match(vs[1]!.message, /never opened/);
  });

  it("stored-twice and acked-lost: over the agents' record of acknowledged messages", () => {
    const f = converged();
    const s = f.state.inventory.nodes.get("gpu-1")!.session!.sessionId;
    const openedSeq = f.state.inventory.nodes.get("gpu-1")!.session!.openedSeq;
    const evt = (id: string, seq: bigint): CheckedEvent => {
      const event = create(EventSchema, {
        id,
        timeUnixMs: BigInt(f.nowMs),
        writer: { kind: Writer_Kind.GATEWAY, id: "gw-1" },
        body: {
          case: "shardStatus",
          value: { nodeId: "gpu-1", sessionId: s, sessionSeq: seq, status: { shardId: "x", replicaId: "y" } },
        },
      });
      return { seq: f.state.seq + Number(seq), timeMs: f.nowMs, event };
    };
    const records: CheckedEvent[] = [...f.events, evt(`${s}-7`, 7n), evt(`${s}-8`, 8n), evt(`${s}-8`, 9n)];
    const acked = [
      { nodeId: "gpu-1", sessionId: s, messageId: "7" },
      { nodeId: "gpu-1", sessionId: s, messageId: "8" },
      { nodeId: "gpu-1", sessionId: s, messageId: "10" },
      { nodeId: "gpu-2", sessionId: s, messageId: "7" },
    ];
    const vs = checkLog(records, { acked }).violations;
    assert.deepEqual(rules(vs).sort(), ["acked-lost", "acked-lost", "stored-twice"]);
    const lost = vs.find((v) => v.message.includes("message 10"))!;
    assert.equal(lost.seq, openedSeq);
    assert.match(lost.message, /acknowledged to the agent but is not in the log/);
    assert.match(vs.find((v) => v.rule === "stored-twice")!.message, new RegExp(`${s}-8 is stored 2 times`));
    assert.deepEqual(checkLog(records.slice(0, -1), { acked: acked.slice(0, 2) }).violations, []);
  });

  it("replay-determinism: a fold that depends on more than the log is caught at the event where it shows", () => {
    const f = converged();
    let calls = 0;
    // Counts its own invocations into the state: the second fold differs.
    const leaky: Projection<{ n: number; seen: number }> = {
      name: "leaky",
      schemaVersion: 1,
      initialState: () => ({ n: 0, seen: 0 }),
      revive: (json) => json as { n: number; seen: number },
      evolve: (s, e) => {
        calls++;
        s.seen++;
        if (e.body.case === "reconcilePass") s.n = calls;
        return s;
      },
    };
    const vs = checkLog(f.events, {
      projection: leaky as Projection<unknown>,
      checkpointEvery: 3,
    }).violations;
    assert.deepEqual(rules(vs), ["replay-determinism"]);
    const firstPass = f.events.find((r) => r.event.body.case === "reconcilePass")!;
    assert.equal(vs[0]!.seq, firstPass.seq);
    assert.match(vs[0]!.message, /two folds of the same log differ after the event at \d+ \(reconcilePass\)/);
    assert.deepEqual(
      checkLog(f.events, { projection: fleetProjection as Projection<unknown>, checkpointEvery: 1 })
        .violations,
      [],
    );
  });

  it("malformed-event: a message of the log that is not an event", () => {
    const f = converged();
    const vs = checkLog(f.events, { malformed: [{ seq: 3, message: "not an llmgw event" }] }).violations;
    assert.deepEqual(
      vs.map((v) => [v.rule, v.seq]),
      [["malformed-event", 3]],
    );
    assert.match(vs[0]!.message, /message at 3 is not an event: not an llmgw event/);
  });

  it("endpoint-not-ready: passes a churned history with endpoints; a table listing a replica that is not ready", () => {
    const f = new Fleet();
    f.endpointOf = (node, shard) => `http://${node}:8000/${shard}`;
    f.catalog(llama70b(2));
    f.connect("gpu-1");
    f.connect("gpu-2");
    f.advance(1000).run();
    f.catalog(llama70b(1));
    f.run();
    assert.equal(f.state.replicas.endpoints["llama-3.3-70b"]?.length, 1);
    assert.deepEqual(checkLog(f.events).violations, []);

    // A pass that lists a replica whose only shard failed before the state it decided on.
    const [r] = f.state.replicas.replicas.values();
    const shard = r!.shards[0]!;
    f.shard(shard.nodeId, r!.replicaId, shard.shardId, ShardStatus_State.FAILED, "engine died");
    pass(f, {
      decisions: [
        {
          explanation: "stale",
          kind: {
            case: "endpointsChanged",
            value: {
              model: r!.model,
              endpoints: [{ replicaId: r!.replicaId, url: shard.endpoint, nodeId: shard.nodeId }],
            },
          },
        },
      ],
    });
    const vs = checkLog(f.events).violations;
    assert.deepEqual(rules(vs), ["endpoint-not-ready"]);
    assert.match(vs[0]!.message, new RegExp(`lists ${r!.replicaId} .*shard ${shard.shardId} is failed`));
  });

  it("endpoint-not-ready: a replica whose drain starts in a pass is out of that pass's table", () => {
    const f = new Fleet();
    f.endpointOf = (node, shard) => `http://${node}:8000/${shard}`;
    f.catalog(llama70b(1));
    f.connect("gpu-1");
    f.advance(1000).run();
    const [r] = f.state.replicas.replicas.values();
    // The drain, without restating the table: the replica stays listed.
    pass(f, {
      decisions: [
        {
          explanation: "drain",
          kind: { case: "replicaDrainStarted", value: { replicaId: r!.replicaId, reason: "scale down" } },
        },
      ],
    });
    // The drain, with no replacement, also takes the model below make-before-break.
    const vs = checkLog(f.events).violations;
    assert.deepEqual(rules(vs).sort(), ["below-disruption-budget", "endpoint-not-ready"]);
    assert.match(
      vs.find((v) => v.rule === "endpoint-not-ready")!.message,
      /its drain starts in this very pass/,
    );
  });

  it("rollout-below-ready: a pass that drains an old replica before its replacement is ready, during a rollout", () => {
    const f = new Fleet();
    f.catalog(llama8b(2));
    f.connect("gpu-1");
    f.advance(1000).run();
    const changed = llama8b(2);
    f.catalog({ ...changed, profiles: changed.profiles.map((p) => ({ ...p, engineArgs: ["--new"] })) });
    f.step(); // rolloutStarted, the first replacement created and placed (not running yet)
    assert.deepEqual(rules(checkLog(f.events).violations), []);
    const old = f.state.replicas.replicas.values().find((r) => r.replacedBy !== "");
    assert.ok(old);
    pass(f, {
      decisions: [
        {
          explanation: "drain too early",
          kind: { case: "replicaDrainStarted", value: { replicaId: old.replicaId, reason: "rollout" } },
        },
      ],
    });
    const vs = checkLog(f.events).violations.filter((v) => v.rule === "rollout-below-ready");
    assert.equal(vs.length, 1);
    assert.match(
      vs[0]!.message,
      /took llama-3\.1-8b from 2 to 1 ready replicas during its rollout, below 2 desired − 0 maxUnavailable = 2/,
    );
  });

  for (const replaced of [false, true]) {
    it(`rollout-below-ready: a ready replica lost by its agent (back running nothing) is not taken: ${replaced ? "replaced, the pass removes it" : "the pass records it failed"}`, () => {
      const f = new Fleet();
      f.catalog(llama8b(2));
      f.connect("gpu-1");
      f.connect("gpu-2");
      f.advance(1000).run();
      const changed = llama8b(2);
      f.catalog({ ...changed, profiles: changed.profiles.map((p) => ({ ...p, engineArgs: ["--new"] })) });
      f.step(); // rolloutStarted, the first replacement created and placed (not running yet)
      const victim = f.state.replicas.replicas
        .values()
        .find((r) => (r.replacedBy !== "") === replaced && r.phase === "running");
      assert.ok(victim);
      // The agent restarts and registers again running nothing.
      f.connect(victim.shards[0]!.nodeId);
      const out = f.step();
      const kind = replaced ? "replicaRemoved" : "replicaFailed";
      assert.ok(
        out.decisions.some((d) => d.kind.case === kind && d.kind.value.replicaId === victim.replicaId),
        `the pass records the lost replica (${kind})`,
      );
      assert.deepEqual(
        checkLog(f.events).violations.filter((v) => v.rule === "rollout-below-ready"),
        [],
      );
    });
  }

  it("a log out of order is reported", () => {
    const f = converged();
    const records = [...f.events];
    const [a, b] = [records[2]!, records[3]!];
    records[2] = b;
    records[3] = a;
    assert.ok(checkLog(records).violations.some((v) => /not in order/.test(v.message)));
  });
});

describe("parseAckedList", () => {
  it("reads a JSON array and JSON lines", () => {
    const one = { nodeId: "n1", sessionId: "s1", messageId: "3" };
    assert.deepEqual(parseAckedList(JSON.stringify([one])), [one]);
    assert.deepEqual(parseAckedList(`${JSON.stringify(one)}\n${JSON.stringify(one)}\n`), [one, one]);
    assert.deepEqual(parseAckedList("  "), []);
  });

  it("names the entry and field that is wrong", () => {
    assert.throws(() => parseAckedList('[{"nodeId":"n","sessionId":"s"}]'), /entry 0: messageId/);
    assert.throws(() => parseAckedList('{"nodeId":"n","sessionId":"s","messageId":"1"}\n{oops'), /line 2/);
    assert.throws(() => parseAckedList("[1,"), /not valid JSON/);
  });
});
