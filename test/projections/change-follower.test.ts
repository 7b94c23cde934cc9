import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { writable } from "../../src/projections/fork.js";
import { followChanges, forkFleet } from "../../src/projections/index.js";
import { dropRecord, putRecord } from "../../src/projections/sorted-keys.js";
import { busyFleet } from "../support/fleet.js";

describe("projections: following a container's change marks", () => {
  it("gives each follower every id marked since it last took them, once, whoever marked it", () => {
    const rec: Record<string, { n: number }> = { a: { n: 1 }, b: { n: 2 } };
    const first = followChanges(rec);
    putRecord(rec, "c", { n: 3 });
    const second = followChanges(rec);
    (writable(rec, "a") as { n: number }).n++;
    (writable(rec, "a") as { n: number }).n++;
    dropRecord(rec, "b");
    assert.deepEqual([...first.take()].sort(), ["a", "b", "c"]);
    assert.deepEqual([...first.take()], [], "taken ids are not given again");
    assert.deepEqual(
      [...second.take()].sort(),
      ["a", "b"],
      "a follower sees what was marked after it started",
    );
    second.stop();
    putRecord(rec, "d", { n: 4 });
    assert.deepEqual([...first.take()], ["d"]);
    assert.deepEqual([...second.take()], [], "a stopped follower keeps nothing");
  });

  it("a pass's fork marks what it changes, and its release marks it again", () => {
    const f = busyFleet();
    const replicas = f.state.replicas.replicas;
    const follower = followChanges(replicas);
    const id = Object.keys(replicas)[0] as string;
    const fork = forkFleet(f.state);
    fork.fold(() => {
      const r = writable(fork.state.replicas.replicas, id);
      if (r) r.shards = [];
    });
    assert.deepEqual([...follower.take()], [id]);
    fork.release();
    assert.deepEqual([...follower.take()], [id], "the record put back is marked: a follower reads it again");
    follower.stop();
  });
});
