import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { DecisionSchema, EventSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import { evolveFleet, forkFleet, sortedKeys } from "../../src/projections/index.js";
import { shardOwner } from "../../src/projections/shard-owners.js";
import type { DecideOutput } from "../../src/reconciler/index.js";
import { busyFleet, type Fleet } from "../support/fleet.js";

/** A reconcile pass of `out`'s decisions and commands, as the leader appends it. */
function passEvent(f: Fleet, out: Pick<DecideOutput, "decisions" | "commands">) {
  return create(EventSchema, {
    id: "p",
    body: {
      case: "reconcilePass",
      value: { nowUnixMs: BigInt(f.nowMs), decisions: out.decisions, commands: out.commands },
    },
  });
}

/** A pass of one decision, explained "x". */
function onePass(f: Fleet, kind: MessageInitShape<typeof DecisionSchema>["kind"]) {
  return passEvent(f, { decisions: [create(DecisionSchema, { explanation: "x", kind })], commands: [] });
}

describe("projections: a fork of the fleet", () => {
  it("given a busy fleet, when a pass is folded into a fork, then the fork equals the pass folded into a full copy and the original is unchanged", () => {
    const f = busyFleet();
    const out = f.decide();
    assert.ok(out.decisions.length > 3 && out.commands.length > 0, "the pass does something");
    const before = JSON.stringify(f.state);
    const meta = { seq: f.state.seq + 1, timeMs: f.nowMs };

    const copy = evolveFleet(structuredClone(f.state), passEvent(f, out), meta);
    const fork = forkFleet(f.state);
    fork.fold(() => evolveFleet(fork.state, passEvent(f, out), meta));

    assert.equal(JSON.stringify(fork.state), JSON.stringify(copy), "same content, same record order");
    fork.release();
    assert.equal(JSON.stringify(f.state), before, "the original gets its content back");
  });

  it("given a fork, when the fold changes a record in place, then the fork keeps the object (what a rule holds sees the change) and the original gets a copy", () => {
    const f = busyFleet();
    const fork = forkFleet(f.state);
    const [id, held] =
      Object.entries(fork.state.replicas.replicas).find(([, r]) => r.phase === "running") ?? [];
    assert.ok(id && held);
    const failed = onePass(f, { case: "replicaFailed", value: { replicaId: id, error: "gone" } });
    fork.fold(() => evolveFleet(fork.state, failed, { seq: f.state.seq + 1, timeMs: f.nowMs }));
    assert.equal(fork.state.replicas.replicas[id], held);
    assert.equal(held.phase, "pending");
    fork.release();
    assert.notEqual(f.state.replicas.replicas[id], held);
    assert.notEqual(f.state.replicas.replicas[id]?.phase, "pending");
  });

  it("answers shard owners as the fork has them while it folds, and the original's again once released", () => {
    const f = busyFleet();
    const r = Object.values(f.state.replicas.replicas).find((x) => x.shards.length > 0);
    const s = r?.shards[0];
    assert.ok(r && s);
    assert.equal(shardOwner(f.state.replicas.replicas, s.nodeId, s.shardId), r.replicaId);
    const fork = forkFleet(f.state);
    assert.equal(shardOwner(fork.state.replicas.replicas, s.nodeId, s.shardId), r.replicaId);
    const removed = onePass(f, { case: "replicaRemoved", value: { replicaId: r.replicaId } });
    fork.fold(() => evolveFleet(fork.state, removed, { seq: f.state.seq + 1, timeMs: f.nowMs }));
    assert.equal(shardOwner(fork.state.replicas.replicas, s.nodeId, s.shardId), "", "gone from the fork");
    fork.release();
    assert.equal(
      shardOwner(f.state.replicas.replicas, s.nodeId, s.shardId),
      r.replicaId,
      "back in the original once the fork is released",
    );
  });

  it("given a pass that removes a record from the middle and creates others, when the fork is released, then the original has its content, record order, key lists and shard owners back", () => {
    const f = busyFleet();
    const out = f.decide();
    const ids = Object.keys(f.state.replicas.replicas);
    const middle = f.state.replicas.replicas[ids[Math.floor(ids.length / 2)] as string];
    const s = middle?.shards[0];
    assert.ok(middle && s, "a placed replica in the middle of the record");
    const before = JSON.stringify(f.state);
    const sortedBefore = sortedKeys(f.state.replicas.replicas);
    const fork = forkFleet(f.state);
    const removeAndPlace = passEvent(f, {
      decisions: [
        create(DecisionSchema, {
          explanation: "x",
          kind: { case: "replicaRemoved", value: { replicaId: middle.replicaId } },
        }),
        ...out.decisions,
      ],
      commands: out.commands,
    });
    fork.fold(() => evolveFleet(fork.state, removeAndPlace, { seq: f.state.seq + 1, timeMs: f.nowMs }));
    const during = fork.state.replicas.replicas;
    assert.equal(during[middle.replicaId], undefined, "removed in the fork");
    assert.ok(Object.keys(during).length > ids.length - 1, "the pass created replicas");
    assert.deepEqual(
      sortedKeys(during),
      Object.keys(during).sort(),
      "the fork's sorted keys follow its records",
    );
    fork.release();
    const after = f.state.replicas.replicas;
    assert.equal(JSON.stringify(f.state), before, "same content and record order");
    assert.deepEqual(Object.keys(after), ids);
    assert.deepEqual(sortedKeys(after), sortedBefore, "the sorted keys are the original's");
    assert.deepEqual(sortedKeys(after), [...ids].sort());
    assert.equal(shardOwner(after, s.nodeId, s.shardId), middle.replicaId, "the shard owner is back");
  });

  it("refuses to fold into a released fork (its containers are the original's again)", () => {
    const f = busyFleet();
    const fork = forkFleet(f.state);
    fork.release();
    assert.throws(() => fork.fold(() => {}), /released fork/);
  });
});
