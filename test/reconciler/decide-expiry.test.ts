import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Liveness } from "../../src/gen/llmgw/v1/events_pb.js";
import { actions, Fleet, kinds, llama70b, llama405b, ofKind } from "../support/fleet.js";

describe("decide: two-stage expiry", () => {
  it("given a node without a session: suspect after suspectAfter (replicas kept), lost after lostAfter (re-placed)", () => {
    const f = Fleet.of([llama70b(1)], ["gpu-a1", "gpu-b1"]);
    f.run();
    const [r] = f.replicasOf("llama-3.3-70b");
    const node = r?.shards[0]?.nodeId as string;
    const since = f.nowMs;
    f.disconnect(node);
    assert.deepEqual(f.step().decisions, [], "a fresh disconnection is nothing yet");
    assert.equal(f.decide().nextDeadlineMs, since + f.config.suspectAfterMs);

    f.advance(f.config.suspectAfterMs);
    const suspect = f.step();
    assert.deepEqual(kinds(suspect.decisions), ["nodeLiveness"]);
    assert.equal(ofKind(suspect.decisions, "nodeLiveness")[0]?.liveness, Liveness.SUSPECT);
    assert.equal(f.state.inventory.nodes.get(node)?.liveness, "suspect");
    assert.equal(
      f.state.replicas.replicas.get(r?.replicaId as string)?.shards[0]?.nodeId,
      node,
      "replicas kept",
    );
    assert.equal(f.decide().nextDeadlineMs, since + f.config.lostAfterMs);

    f.advance(f.config.lostAfterMs - f.config.suspectAfterMs);
    const lost = f.step();
    assert.deepEqual(kinds(lost.decisions), ["nodeLiveness", "replicaFailed", "replicaPlaced"]);
    assert.equal(ofKind(lost.decisions, "nodeLiveness")[0]?.liveness, Liveness.LOST);
    assert.notEqual(ofKind(lost.decisions, "replicaPlaced")[0]?.shards[0]?.nodeId, node);
    assert.deepEqual(f.settle(), []);
  });

  it("given a node that comes back before it is lost, keeps everything", () => {
    const f = Fleet.of([llama70b(1)], ["gpu-a1"]);
    f.run();
    const [r] = f.replicasOf("llama-3.3-70b");
    const s = r?.shards[0];
    assert.ok(r && s);
    f.disconnect("gpu-a1").advance(f.config.suspectAfterMs + 1);
    f.step();
    f.advance(1_000);
    f.connect("gpu-a1", {
      running: [
        { shard: s.shardId, replica: r.replicaId, model: r.model, profile: "tp4", gpus: s.gpuIndices },
      ],
    });
    const back = f.step();
    assert.deepEqual(kinds(back.decisions), ["shardsAdopted"]);
    f.advance(f.config.lostAfterMs);
    assert.deepEqual(f.settle(), [], "a connected node never expires");
  });

  it("given a lost node holding one shard of a 2-node replica, stops the shard on the other node", () => {
    const f = new Fleet();
    f.catalog(llama405b(1));
    for (const n of ["gpu-a1", "gpu-a2", "gpu-a3"]) f.connect(n);
    f.run();
    const [r] = f.replicasOf("llama-3.1-405b");
    assert.equal(r?.shards.length, 2);
    const [s0, s1] = r?.shards ?? [];
    f.disconnect(s0?.nodeId as string).advance(f.config.lostAfterMs);
    const out = f.step();
    assert.deepEqual(kinds(out.decisions), ["nodeLiveness", "replicaFailed", "replicaPlaced"]);
    assert.deepEqual(actions(out.commands).slice(0, 1), [`stop:${s1?.nodeId}`]);
  });
});

describe("decide: gateway loss", () => {
  it("given a running gateway whose lease is gone, expires every session it held; the nodes then expire in two stages", () => {
    const f = new Fleet();
    f.apply({
      case: "gatewayStarted",
      value: { gatewayId: "gw-2", listenAddress: ":8443", version: "0.1.0" },
    });
    f.live.add("gw-2");
    f.catalog();
    f.connect("gpu-a1", {}, "gw-2");
    f.connect("gpu-a2", {}, "gw-2");
    f.connect("gpu-b1", {}, "gw-1");
    f.settle();
    f.live.delete("gw-2");
    const out = f.step();
    assert.deepEqual(kinds(out.decisions), ["sessionsExpired"]);
    assert.deepEqual(
      ofKind(out.decisions, "sessionsExpired")[0]?.sessions.map((s) => s.nodeId),
      ["gpu-a1", "gpu-a2"],
    );
    assert.equal(f.state.inventory.gateways["gw-2"]?.status, "lost");
    assert.equal(f.state.inventory.nodes.get("gpu-a1")?.session, null);
    assert.ok(f.state.inventory.nodes.get("gpu-b1")?.session);
    assert.deepEqual(f.settle(), []);
    f.advance(f.config.suspectAfterMs);
    assert.deepEqual(kinds(f.step().decisions), ["nodeLiveness", "nodeLiveness"]);
  });

  it("given a gateway that stopped cleanly, does nothing about it", () => {
    const f = new Fleet();
    f.apply({ case: "gatewayStopped", value: { gatewayId: "gw-1", reason: "SIGTERM" } });
    f.live.clear();
    assert.deepEqual(f.step().decisions, []);
  });
});
