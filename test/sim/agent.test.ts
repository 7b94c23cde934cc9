import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { waitFor } from "../support/fake-gateway.js";
import { heartbeats, nextHeartbeat, registered, results, statuses, withFleet } from "../support/sim.js";

describe("simulated agents against a real Connect server (h2c)", () => {
  it("register realistic hardware, fabrics in groups of nodes, and heartbeat", () =>
    withFleet({ nodes: 6, nodesPerFabric: 4, labels: { zone: "eu-west-1a" } }, async (fleet, gw) => {
      await waitFor("6 registrations", () => gw.streams.filter((s) => s.register).length === 6);
      for (let i = 1; i <= 6; i++) {
        const id = `node-${i}`;
        const s = gw.latest(id)!;
        const reg = s.register!;
        assert.equal(reg.nodeId, id);
        assert.match(reg.agentVersion, /\S/);
        assert.equal(reg.gpus.length, 8);
        assert.deepEqual(
          reg.gpus.map((g) => g.index),
          [0, 1, 2, 3, 4, 5, 6, 7],
        );
        for (const g of reg.gpus) {
          assert.equal(g.product, "NVIDIA H100 80GB HBM3");
          assert.equal(g.memoryTotalMb, 81559n);
          assert.equal(g.memoryUsedMb, 0n);
          assert.match(g.uuid, /^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
        }
        assert.equal(new Set(reg.gpus.map((g) => g.uuid)).size, 8);
        const nvlink = reg.fabrics.filter((f) => f.kind === "nvlink");
        assert.equal(nvlink.length, 1);
        assert.deepEqual(nvlink[0]!.gpuIndices, [0, 1, 2, 3, 4, 5, 6, 7]);
        const ib = reg.fabrics.filter((f) => f.kind === "infiniband");
        assert.equal(ib.length, 1);
        assert.equal(ib[0]!.name, i <= 4 ? "ib-pod-1" : "ib-pod-2");
        assert.deepEqual(reg.runningShards, []);
        assert.deepEqual(reg.labels, { zone: "eu-west-1a" });
      }
      // NVLink domains are per node: distinct names.
      const nvNames = new Set([1, 2, 3].map((i) => gw.latest(`node-${i}`)!.register!.fabrics[0]!.name));
      assert.equal(nvNames.size, 3);
      const hb = await waitFor("a heartbeat from node-1", () => heartbeats(gw.latest("node-1")!)[0]);
      assert.deepEqual(hb.gpuMemoryUsedMb, Array(8).fill(0n));
      assert.deepEqual(hb.newProblems, []);
      await waitFor("all connected", () => fleet.summary().connected === 6);
    }));

  it("starts a shard: ok, STARTING, then RUNNING with ~90 % of the GPUs' memory; drains and stops", () =>
    withFleet({ nodes: 1 }, async (fleet, gw) => {
      const s = await registered(gw, "node-1");
      const start = gw.command("node-1", {
        case: "start",
        value: {
          shardId: "sh-1",
          replicaId: "llama-70b-0",
          model: "meta-llama/Llama-3.3-70B-Instruct",
          profile: "tp4",
          gpuIndices: [0, 1, 2, 3],
          worldSize: 1,
        },
      });
      await waitFor("RUNNING", () => statuses(s, "sh-1").some((x) => x.state === State.RUNNING));
      assert.deepEqual(results(s)[0], { ...results(s)[0], commandId: start, ok: true });
      assert.deepEqual(
        statuses(s, "sh-1").map((x) => x.state),
        [State.STARTING, State.RUNNING],
      );
      assert.equal(statuses(s, "sh-1")[0]!.replicaId, "llama-70b-0");
      const hb = await nextHeartbeat(s);
      const used = hb.gpuMemoryUsedMb.map(Number);
      for (const i of [0, 1, 2, 3]) {
        assert.ok(used[i]! > 0.85 * 81559 && used[i]! <= 81559, `GPU ${i} uses ${used[i]} MiB`);
      }
      assert.deepEqual(used.slice(4), [0, 0, 0, 0]);
      assert.equal(fleet.summary().running, 1);

      const drain = gw.command("node-1", { case: "drain", value: { shardId: "sh-1", deadlineUnixMs: 0n } });
      await waitFor("STOPPED after drain", () => statuses(s, "sh-1").some((x) => x.state === State.STOPPED));
      assert.deepEqual(
        statuses(s, "sh-1").map((x) => x.state),
        [State.STARTING, State.RUNNING, State.DRAINING, State.STOPPED],
      );
      assert.ok(results(s).some((r) => r.commandId === drain && r.ok));

      // Stop: at once, memory released.
      gw.command("node-1", {
        case: "start",
        value: { shardId: "sh-2", replicaId: "llama-8b-0", model: "llama-8b", gpuIndices: [7] },
      });
      await waitFor("sh-2 RUNNING", () => statuses(s, "sh-2").some((x) => x.state === State.RUNNING));
      const stop = gw.command("node-1", { case: "stop", value: { shardId: "sh-2" } });
      await waitFor("sh-2 STOPPED", () => statuses(s, "sh-2").some((x) => x.state === State.STOPPED));
      assert.ok(results(s).some((r) => r.commandId === stop && r.ok));
      const hb2 = await nextHeartbeat(s);
      assert.deepEqual(hb2.gpuMemoryUsedMb, Array(8).fill(0n));

      // Unknown shards are refused with a reason.
      const badStop = gw.command("node-1", { case: "stop", value: { shardId: "nope" } });
      const badDrain = gw.command("node-1", { case: "drain", value: { shardId: "nope" } });
      const refused = await waitFor("two refusals", () => {
        const r = results(s).filter((x) => x.commandId === badStop || x.commandId === badDrain);
        return r.length === 2 ? r : undefined;
      });
      for (const r of refused) {
        assert.equal(r.ok, false);
        assert.match(r.error, /unknown shard "nope"/);
      }
      assert.ok(fleet.counters().commandsReceived >= 6);
    }));

  it("drains until the deadline when it comes before the drain time", () =>
    withFleet({ nodes: 1, drainMs: 600_000 }, async (_fleet, gw) => {
      const s = await registered(gw, "node-1");
      gw.command("node-1", { case: "start", value: { shardId: "sh-d", replicaId: "r", gpuIndices: [0] } });
      await waitFor("RUNNING", () => statuses(s, "sh-d").some((x) => x.state === State.RUNNING));
      const deadline = Date.now() + 200;
      gw.command("node-1", { case: "drain", value: { shardId: "sh-d", deadlineUnixMs: BigInt(deadline) } });
      const stopped = await waitFor("STOPPED at the deadline", () =>
        statuses(s, "sh-d").find((x) => x.state === State.STOPPED),
      );
      assert.ok(Date.now() >= deadline, "not before the deadline");
      // The agent stopped it at the deadline: the engine says what it cut off.
      assert.equal(stopped.exitCode, 0);
      assert.match(
        stopped.lastOutput,
        /received SIGTERM\nWARNING shutting down with \d+ requests still in flight/,
      );
    }));

  it("speaks the gRPC protocol too", () =>
    withFleet({ nodes: 1, protocol: "grpc" }, async (_fleet, gw) => {
      const s = await registered(gw, "node-1");
      await nextHeartbeat(s);
    }));
});
