import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { DecisionSchema, EventSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import {
  cloneFleet,
  evolveFleet,
  forkFleet,
  type ReplicaState,
  shardKey,
  shardOwners,
  type TableView,
} from "../../src/projections/index.js";
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

/** The replica holding a shard on a node, as the table's shard-owner lookup answers. */
function shardOwner(replicas: TableView<ReplicaState>, nodeId: string, shardId: string): string {
  return replicas.lookup(shardOwners, shardKey(nodeId, shardId));
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

    const copy = evolveFleet(cloneFleet(f.state), passEvent(f, out), meta);
    const fork = forkFleet(f.state);
    evolveFleet(fork.state, passEvent(f, out), meta);

    assert.equal(JSON.stringify(fork.state), JSON.stringify(copy), "same content, same record order");
    fork.release();
    assert.equal(JSON.stringify(f.state), before, "the original gets its content back");
  });

  it("given a record read before a pass, when the pass's fork changes it and is released, then the record read is the table's record again and holds what it held before the pass", () => {
    const f = busyFleet();
    const held = f.state.replicas.replicas.values().find((r) => r.phase === "running");
    assert.ok(held);
    const id = held.replicaId;
    const was = JSON.stringify(held);
    const fork = forkFleet(f.state);
    const failed = onePass(f, { case: "replicaFailed", value: { replicaId: id, error: "gone" } });
    evolveFleet(fork.state, failed, { seq: f.state.seq + 1, timeMs: f.nowMs });
    assert.equal(
      fork.state.replicas.replicas.get(id),
      held,
      "changed in place: a rule holding it sees the change",
    );
    assert.equal(held.phase, "pending");
    assert.deepEqual(held.shards, []);
    fork.release();
    assert.equal(f.state.replicas.replicas.get(id), held, "the same object");
    assert.equal(JSON.stringify(held), was, "not the fork's changed record: what it held before the pass");
    assert.equal(held.phase, "running");
  });

  it("answers shard owners as the fork has them while it folds, and the original's again once released", () => {
    const f = busyFleet();
    const r = f.state.replicas.replicas.values().find((x) => x.shards.length > 0);
    const s = r?.shards[0];
    assert.ok(r && s);
    assert.equal(shardOwner(f.state.replicas.replicas, s.nodeId, s.shardId), r.replicaId);
    const fork = forkFleet(f.state);
    assert.equal(shardOwner(fork.state.replicas.replicas, s.nodeId, s.shardId), r.replicaId);
    const removed = onePass(f, { case: "replicaRemoved", value: { replicaId: r.replicaId } });
    evolveFleet(fork.state, removed, { seq: f.state.seq + 1, timeMs: f.nowMs });
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
    const ids = f.state.replicas.replicas.keys();
    const middle = f.state.replicas.replicas.get(ids[Math.floor(ids.length / 2)] as string);
    const s = middle?.shards[0];
    assert.ok(middle && s, "a placed replica in the middle of the record");
    const before = JSON.stringify(f.state);
    const sortedBefore = f.state.replicas.replicas.sortedKeys();
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
    evolveFleet(fork.state, removeAndPlace, { seq: f.state.seq + 1, timeMs: f.nowMs });
    const during = fork.state.replicas.replicas;
    assert.equal(during.get(middle.replicaId), undefined, "removed in the fork");
    assert.ok(during.size > ids.length - 1, "the pass created replicas");
    assert.deepEqual(
      during.sortedKeys(),
      Object.keys(during.toJSON()).sort(),
      "the fork's sorted keys follow its records",
    );
    during.verify();
    fork.release();
    const after = f.state.replicas.replicas;
    assert.equal(JSON.stringify(f.state), before, "same content and record order");
    assert.deepEqual(Object.keys(after.toJSON()), ids);
    assert.deepEqual(after.keys(), ids);
    assert.deepEqual(after.sortedKeys(), sortedBefore, "the sorted keys are the original's");
    assert.deepEqual(after.sortedKeys(), [...ids].sort());
    assert.equal(shardOwner(after, s.nodeId, s.shardId), middle.replicaId, "the shard owner is back");
    after.verify();
    f.state.inventory.nodes.verify();
  });

  it("refuses a second fork of a table already forked (one pass at a time), and forks again once released", () => {
    const f = busyFleet();
    const fork = forkFleet(f.state);
    assert.throws(() => forkFleet(f.state), /already forked/);
    fork.release();
    forkFleet(f.state).release();
  });
});
