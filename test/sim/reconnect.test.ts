import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { SimFleet } from "../../src/sim/index.js";
import { deadUrl, FakeGateway, waitFor } from "../support/fake-gateway.js";
import { FAST, registered, statuses, withFleet } from "../support/sim.js";

describe("reconnects and restarts", () => {
  it("moves to the next gateway when the first cannot be reached, then after a Reconnect", async () => {
    const dead = await deadUrl();
    const a = await FakeGateway.start();
    const b = await FakeGateway.start();
    const fleet = new SimFleet({ ...FAST, nodes: 1, gateways: [dead.url, a.url, b.url] });
    try {
      await fleet.start();
      // The first URL resets the connection: the agent registers with the second.
      const onA = await registered(a, "node-1");
      assert.ok(fleet.node("node-1")!.counters.reconnects >= 1);
      assert.match(fleet.node("node-1")!.lastDisconnectReason, /\S/);
      // Gateway A is shutting down: it asks the agent to go elsewhere, after a while.
      onA.send({ msg: { case: "reconnect", value: { reason: "gateway draining", retryAfterMs: 300 } } });
      const onB = await registered(b, "node-1");
      assert.equal(onB.register!.nodeId, "node-1");
      await waitFor(
        "connected on B",
        () => fleet.node("node-1")!.url === b.url && fleet.node("node-1")!.connected,
      );
      assert.equal(b.of("node-1").length, 1);
    } finally {
      await fleet.stop();
      await Promise.all([a.close(), b.close(), dead.close()]);
    }
  });

  it("reconnects, with backoff, when its gateway closes the stream", () =>
    // A backoff of 400 ms with jitter down to half: never sooner than 200 ms after the close.
    withFleet({ nodes: 1, reconnectMinMs: 400, reconnectMaxMs: 400 }, async (fleet, gw) => {
      const first = await registered(gw, "node-1");
      const closedAt = performance.now();
      first.close();
      await waitFor("a second registration", () => gw.of("node-1")[1]?.register);
      const waited = performance.now() - closedAt;
      assert.equal(fleet.counters().reconnects, 1);
      // A lower bound is the behaviour (it waited), not a performance figure.
      assert.ok(waited >= 195, `reconnected ${Math.round(waited)} ms after the close: no backoff`);
    }));

  it("restart keep: comes back reporting the shards it had, with their memory", () =>
    withFleet({ nodes: 1 }, async (fleet, gw) => {
      const s = await registered(gw, "node-1");
      gw.command("node-1", {
        case: "start",
        value: {
          shardId: "sh-k",
          replicaId: "r-k",
          model: "llama-70b",
          profile: "tp4",
          gpuIndices: [4, 5, 6, 7],
        },
      });
      await waitFor("RUNNING", () => statuses(s, "sh-k").some((x) => x.state === State.RUNNING));
      fleet.restartNode("node-1", { keepShards: true });
      const reg = await waitFor("re-registration", () => gw.of("node-1")[1]?.register);
      assert.equal(reg.runningShards.length, 1);
      const shard = reg.runningShards[0]!;
      assert.equal(shard.shardId, "sh-k");
      assert.equal(shard.replicaId, "r-k");
      assert.equal(shard.model, "llama-70b");
      assert.equal(shard.profile, "tp4");
      assert.deepEqual(shard.gpuIndices, [4, 5, 6, 7]);
      assert.equal(shard.state, State.RUNNING);
      assert.ok(reg.gpus[4]!.memoryUsedMb > 70_000n);
      assert.equal(reg.gpus[0]!.memoryUsedMb, 0n);
      assert.equal(fleet.counters().restarts, 1);
    }));

  it("restart empty: comes back running nothing, and says so", () =>
    withFleet({ nodes: 1, restartMode: "empty" }, async (fleet, gw) => {
      const s = await registered(gw, "node-1");
      gw.command("node-1", { case: "start", value: { shardId: "sh-e", replicaId: "r-e", gpuIndices: [0] } });
      await waitFor("RUNNING", () => statuses(s, "sh-e").some((x) => x.state === State.RUNNING));
      // No option: the configured restart mode.
      fleet.restartNode("node-1");
      const reg = await waitFor("re-registration", () => gw.of("node-1")[1]?.register);
      assert.deepEqual(reg.runningShards, []);
      assert.ok(reg.gpus.every((g) => g.memoryUsedMb === 0n));
      assert.equal(fleet.node("node-1")!.shardList().length, 0);
      assert.throws(() => fleet.restartNode("node-9"), /no simulated node "node-9"/);
    }));
});

describe("starting a fleet in batches", () => {
  it("starts the next batch only once the one before registered", async () => {
    const gw = await FakeGateway.start();
    const fleet = new SimFleet({ ...FAST, nodes: 5, gateways: [gw.url] });
    try {
      const registered: string[] = [];
      fleet.on((e) => {
        if (e.type === "registered") registered.push(e.nodeId);
      });
      await fleet.start({ batch: 2 });
      // Resolved after the last batch started: the two before it had registered.
      assert.ok(registered.length >= 4, `${registered.length} registered when start resolved`);
      assert.deepEqual(new Set(registered.slice(0, 2)), new Set(["node-1", "node-2"]));
      await waitFor("all 5 registered", () => new Set(registered).size === 5);
    } finally {
      await fleet.stop();
      await gw.close();
    }
  });
});

describe("engines already running when the agent starts", () => {
  it("registers them as running shards, with their memory, and honours a stop", () =>
    withFleet(
      {
        nodes: 2,
        runningShards: {
          "node-1": [
            {
              shardId: "sh-p",
              replicaId: "r-p",
              model: "llama-3.3-70b",
              profile: "tp4",
              gpuIndices: [0, 1, 2, 3],
            },
          ],
        },
      },
      async (_fleet, gw) => {
        const one = await registered(gw, "node-1");
        const reg = one.register!;
        assert.deepEqual(
          reg.runningShards.map((r) => [r.shardId, r.replicaId, r.state, [...r.gpuIndices]]),
          [["sh-p", "r-p", State.RUNNING, [0, 1, 2, 3]]],
        );
        assert.ok(Number(reg.gpus[0]!.memoryUsedMb) > 0);
        assert.equal(Number(reg.gpus[4]!.memoryUsedMb), 0);
        // The other node found nothing running, and says so.
        const two = await registered(gw, "node-2");
        assert.equal(two.register!.runningShards.length, 0);
        gw.command("node-1", { case: "stop", value: { commandId: "c-stop", shardId: "sh-p" } });
        await waitFor("STOPPED", () => statuses(one, "sh-p").some((x) => x.state === State.STOPPED));
      },
    ));
});
