import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import {
  type Command,
  CommandUndeliverable_Action,
  CommandUndeliverable_Reason,
  ReplicaFailed_Reason,
} from "../../src/gen/llmgw/v1/events_pb.js";
import { given } from "../projections/gwt.js";
import { Fleet, kinds, llama70b, ofKind } from "../support/fleet.js";

const MODEL = "llama-3.3-70b";

function drainDeadlineOf(c: Command | undefined): bigint | undefined {
  return c?.action.case === "drain" ? c.action.value.deadlineUnixMs : undefined;
}

/** The gateway's report that `c` could not be delivered to the session it addressed. */
function undeliverable(f: Fleet, c: Command, reason = CommandUndeliverable_Reason.SESSION_CLOSED) {
  const a = c.action;
  const action =
    a.case === "start"
      ? CommandUndeliverable_Action.START
      : a.case === "stop"
        ? CommandUndeliverable_Action.STOP
        : CommandUndeliverable_Action.DRAIN;
  return f.apply({
    case: "commandUndeliverable",
    value: {
      commandId: c.commandId,
      attempt: c.attempt,
      nodeId: c.nodeId,
      sessionId: c.sessionId,
      gatewayId: "gw-1",
      reason,
      detail: `session ${c.sessionId} of ${c.nodeId} ended on gateway gw-1: the connection ended`,
      action,
      shardId: a.value?.shardId ?? "",
      replicaId: a.case === "start" ? a.value.replicaId : c.replicaId,
      passSeq: 1n,
    },
  });
}

describe("decide: drain deadlines on the wire", () => {
  it("a drain command carries the replica's drain start + drainDeadlineMs; a re-issue keeps it", () => {
    const f = new Fleet({ retryBaseMs: 5_000 });
    f.connect("gpu-a1");
    f.catalog(llama70b(1));
    f.run();
    f.advance(7_000);
    const started = f.nowMs;
    f.catalog(llama70b(0));
    const out = f.step();
    assert.deepEqual(kinds(out.decisions), ["replicaDrainStarted"]);
    const [drain] = out.commands;
    assert.equal(drainDeadlineOf(drain), BigInt(started + f.config.drainDeadlineMs));
    assert.ok(Number(drainDeadlineOf(drain)) > Number(f.state.replicas.lastPass?.nowMs));

    // Its result is due like any command's, well before the drain's end.
    assert.equal(drain?.deadlineUnixMs, BigInt(started + f.config.commandTimeoutMs));
    // No result: the drain is sent again, later, with the same drain deadline.
    f.advance(f.config.commandTimeoutMs);
    const again = f.step();
    const reissued = again.commands.find((c) => c.commandId === drain?.commandId);
    assert.ok(reissued, `a re-issue of ${drain?.commandId}: ${JSON.stringify(kinds(again.decisions))}`);
    assert.equal(reissued.attempt, 2);
    assert.equal(drainDeadlineOf(reissued), BigInt(started + f.config.drainDeadlineMs));
  });

  it("the stop after a missed drain deadline names the replica and the deadline", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.catalog(llama70b(1));
    f.run();
    const [r] = f.replicasOf(MODEL);
    const started = f.nowMs;
    f.catalog(llama70b(0));
    f.step();
    f.advance(f.config.drainDeadlineMs);
    const late = f.step();
    const removed = late.decisions.find((d) => d.kind.case === "replicaRemoved");
    const deadline = new Date(started + f.config.drainDeadlineMs).toISOString();
    assert.match(
      removed?.explanation ?? "",
      new RegExp(
        `drain deadline ${deadline} of ${r?.replicaId} passed .* 1 shard\\(s\\) still running; stopping`,
      ),
    );
    assert.deepEqual(
      late.commands.map((c) => c.action.case),
      ["stop"],
    );
  });
});

describe("decide: undeliverable commands", () => {
  function placed() {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.connect("gpu-b1");
    f.settle();
    f.catalog(llama70b(1));
    const out = f.step();
    assert.deepEqual(kinds(out.decisions), ["replicaCreated", "replicaPlaced"]);
    const start = out.commands[0] as Command;
    assert.equal(start.action.case, "start");
    return { f, start };
  }

  it("an undelivered start fails the replica back to pending, and placement re-plans it elsewhere, without cooldown or backoff", () => {
    const { f, start } = placed();
    f.disconnect(start.nodeId);
    undeliverable(f, start);
    assert.equal(f.state.replicas.commands[start.commandId], undefined, "the command will never be answered");
    assert.equal(f.state.replicas.undeliverable[start.commandId]?.kind, "start");
    const out = f.step();
    assert.deepEqual(kinds(out.decisions), ["undeliverableHandled", "replicaFailed", "replicaPlaced"]);
    assert.match(
      out.decisions[0]?.explanation ?? "",
      /start c-\S+ \(attempt 1\) .* undeliverable on gateway gw-1/,
    );
    assert.match(
      ofKind(out.decisions, "replicaFailed")[0]?.error ?? "",
      /^start command undeliverable: session .* ended on gateway gw-1/,
    );
    assert.equal(ofKind(out.decisions, "replicaFailed")[0]?.reason, ReplicaFailed_Reason.UNDELIVERABLE);
    const other = start.nodeId === "gpu-a1" ? "gpu-b1" : "gpu-a1";
    assert.equal(ofKind(out.decisions, "replicaPlaced")[0]?.shards[0]?.nodeId, other);
    assert.deepEqual(f.state.replicas.undeliverable, {});
    assert.deepEqual(f.state.replicas.failures, {}, "not the model's fault: no cooldown count");
    assert.deepEqual(f.state.replicas.cooldowns, {});
    assert.equal(f.replicasOf(MODEL)[0]?.restarts, 0);
    assert.deepEqual(f.settle(), []);
  });

  it("waits while the log still calls the session current (its SessionClosed comes next)", () => {
    const { f, start } = placed();
    undeliverable(f, start, CommandUndeliverable_Reason.SESSION_CLOSING);
    assert.deepEqual(f.decide().decisions, []);
    f.disconnect(start.nodeId);
    assert.deepEqual(kinds(f.step().decisions), ["undeliverableHandled", "replicaFailed", "replicaPlaced"]);
  });

  it("an undelivered start for a shard that has moved on is recorded and nothing else", () => {
    const { f, start } = placed();
    f.obey({ decisions: [], commands: [start], truncated: false, nextDeadlineMs: null });
    const a = start.action.case === "start" ? start.action.value : undefined;
    assert.ok(a);
    f.shard(start.nodeId, a.replicaId, a.shardId, ShardStatus_State.RUNNING);
    f.disconnect(start.nodeId);
    undeliverable(f, start);
    const out = f.step();
    assert.equal(out.decisions[0]?.kind.case, "undeliverableHandled");
    assert.match(out.decisions[0]?.explanation ?? "", /the shard has moved on since; nothing to do/);
    assert.ok(!kinds(out.decisions).includes("replicaFailed"));
  });

  it("an undelivered drain is not sent again; adoption handles the node's next session", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.catalog(llama70b(1));
    f.run();
    f.catalog(llama70b(0));
    const drain = f.step().commands[0] as Command;
    assert.equal(drain.action.case, "drain");
    f.disconnect("gpu-a1");
    undeliverable(f, drain);
    const out = f.step();
    // The drains rule then finds nothing reachable left to drain.
    assert.deepEqual(kinds(out.decisions), ["undeliverableHandled", "replicaRemoved"]);
    assert.match(out.decisions[0]?.explanation ?? "", /nothing is sent to a session that is gone/);
    assert.deepEqual(out.commands, []);
  });
});

describe("replicas fold: CommandUndeliverable", () => {
  it("given a start in flight, when the gateway reports it undeliverable, then it leaves the commands and waits for a pass", () => {
    const { f, start } = (() => {
      const f = new Fleet();
      f.connect("gpu-a1");
      f.catalog(llama70b(1));
      const start = f.settle().flatMap((o) => o.commands)[0] as Command;
      return { f, start };
    })();
    const history = f.events.map((e) => e.event);
    const report = undeliverable(f, start, CommandUndeliverable_Reason.QUEUE_FULL);
    const { before, after, whenSeq } = given(...history).when(report);
    assert.ok(before.replicas.commands[start.commandId]);
    assert.equal(after.replicas.commands[start.commandId], undefined);
    assert.deepEqual(after.replicas.undeliverable[start.commandId], {
      commandId: start.commandId,
      attempt: 1,
      kind: "start",
      nodeId: "gpu-a1",
      sessionId: start.sessionId,
      gatewayId: "gw-1",
      shardId: start.action.case === "start" ? start.action.value.shardId : "",
      replicaId: start.replicaId,
      reason: "queue-full",
      detail: `session ${start.sessionId} of gpu-a1 ended on gateway gw-1: the connection ended`,
      seq: whenSeq,
    });
  });

  it("a report without an action is ignored", () => {
    const f = new Fleet();
    const e = f.apply({
      case: "commandUndeliverable",
      value: { commandId: "c-1", nodeId: "gpu-a1", sessionId: "s-1", gatewayId: "gw-1" },
    });
    const { after } = given().when(e);
    assert.deepEqual(after.replicas.undeliverable, {});
  });
});
