import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { cloneFleet, isReady, routingTable } from "../../src/projections/index.js";
import { Fleet, llama70b } from "../support/fleet.js";

function oneRunning(): { f: Fleet; replicaId: string; shardId: string } {
  const f = new Fleet();
  f.connect("gpu-a1");
  f.catalog(llama70b(1));
  // The first pass handles the registration; the next places.
  const start = f
    .settle()
    .flatMap((o) => o.commands)
    .find((c) => c.action.case === "start");
  if (start?.action.case !== "start") throw new Error("no start");
  const { replicaId, shardId } = start.action.value;
  f.shard("gpu-a1", replicaId, shardId, ShardStatus_State.RUNNING, "", "http://10.0.0.5:8000");
  return { f, replicaId, shardId };
}

describe("projection: shard endpoints and the routing table", () => {
  it("keeps the endpoint a status named when a later status omits it", () => {
    const { f, replicaId, shardId } = oneRunning();
    f.shard("gpu-a1", replicaId, shardId, ShardStatus_State.RUNNING);
    const shard = f.state.replicas.replicas.get(replicaId)!.shards[0]!;
    assert.equal(shard.endpoint, "http://10.0.0.5:8000");
  });

  it("routes to a running replica, and no longer once it fails or drains", () => {
    const { f, replicaId, shardId } = oneRunning();
    const r = f.state.replicas.replicas.get(replicaId)!;
    assert.equal(isReady(r), true);
    assert.deepEqual(routingTable(f.state), {
      "llama-3.3-70b": [{ replicaId, url: "http://10.0.0.5:8000", nodeId: "gpu-a1" }],
    });

    const draining = cloneFleet(f.state);
    draining.replicas.replicas.update(replicaId, (d) => {
      d.phase = "draining";
    });
    assert.equal(isReady(draining.replicas.replicas.get(replicaId)!), false);
    assert.deepEqual(routingTable(draining), {});

    const stopping = cloneFleet(f.state);
    stopping.replicas.replicas.update(replicaId, (r) => {
      r.shards[0]!.desired = "stopped";
    });
    assert.deepEqual(routingTable(stopping), {}, "a shard asked to stop is not routed to");

    f.shard("gpu-a1", replicaId, shardId, ShardStatus_State.FAILED, "engine died");
    assert.deepEqual(routingTable(f.state), {});
  });

  it("folds EndpointsChanged as the model's whole table; an empty one removes the model", () => {
    const { f } = oneRunning();
    f.step();
    assert.equal(f.state.replicas.endpoints["llama-3.3-70b"]?.length, 1);
    f.catalog(llama70b(0));
    f.step();
    assert.deepEqual(f.state.replicas.endpoints, {});
  });
});
