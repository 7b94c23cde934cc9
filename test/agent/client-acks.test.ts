import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { AckTracker } from "../../src/agent/client/index.js";

describe("an agent's record of what the gateway acknowledged", () => {
  it("expands a cumulative ack into the acknowledged kinds it covers, heartbeats left out", () => {
    const t = new AckTracker(true);
    for (const kind of ["register", "shard", "heartbeat", "result", "shard", "heartbeat"] as const)
      t.record(kind);
    assert.equal(t.sent, 6);
    assert.deepEqual(t.acked("register"), [1]);
    assert.deepEqual(t.acked("4"), [2, 4]);
    assert.deepEqual(t.acked("4"), [], "an ack covers nothing twice");
    assert.deepEqual(t.acked("6"), [5]);
  });

  it("takes a plain ack for its own message only", () => {
    const t = new AckTracker(false);
    for (const kind of ["register", "shard", "shard", "heartbeat"] as const) t.record(kind);
    assert.deepEqual(t.acked("3"), [3]);
    assert.deepEqual(t.acked("2"), [2]);
    assert.deepEqual(t.acked("4"), [], "a heartbeat is never acknowledged");
  });
});
