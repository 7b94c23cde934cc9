import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { GpuProblem_Kind, ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import type { SimEvent } from "../../src/sim/index.js";
import { waitFor } from "../support/fake-gateway.js";
import { heartbeats, nextHeartbeat, registered, results, statuses, withFleet } from "../support/sim.js";

const start = (shardId: string, gpuIndices = [0, 1]) =>
  ({
    case: "start",
    value: { shardId, replicaId: `${shardId}-replica`, model: "qwen-32b", gpuIndices },
  }) as const;

describe("named faults", () => {
  it("fail@arg=ARG: every start carrying the engine argument fails, on any node; others start", () =>
    withFleet({ nodes: 2, faults: ["fail@arg=--broken"] }, async (_fleet, gw) => {
      const s = await registered(gw, "node-2");
      gw.command("node-2", {
        case: "start",
        value: { ...start("sh-bad").value, engineArgs: ["--max-model-len=8192", "--broken"] },
      });
      gw.command("node-2", { case: "start", value: { ...start("sh-ok", [2]).value, engineArgs: ["--x"] } });
      const failed = await waitFor("FAILED", () =>
        statuses(s, "sh-bad").find((x) => x.state === State.FAILED),
      );
      // The agent says how the engine ended; the engine's own words are its last output.
      assert.match(failed.error, /the engine exited with code 1/);
      assert.match(failed.lastOutput, /CUDA out of memory/);
      await waitFor("RUNNING", () => statuses(s, "sh-ok").find((x) => x.state === State.RUNNING));
    }));

  it("fail: CUDA out of memory at start → FAILED with the error and exit code, never RUNNING", () =>
    withFleet({ nodes: 2, faults: ["oom@node-1"] }, async (fleet, gw) => {
      const s = await registered(gw, "node-1");
      gw.command("node-1", start("sh-f"));
      const failed = await waitFor("FAILED", () => statuses(s, "sh-f").find((x) => x.state === State.FAILED));
      assert.match(failed.error, /the engine exited with code 1/);
      assert.equal(failed.exitCode, 1);
      assert.match(failed.lastOutput, /CUDA out of memory/);
      assert.deepEqual(
        statuses(s, "sh-f").map((x) => x.state),
        [State.STARTING, State.FAILED],
      );
      assert.equal(results(s)[0]?.ok, true);
      assert.equal(fleet.summary().failed, 1);
      // The other node is healthy.
      const t = await registered(gw, "node-2");
      gw.command("node-2", start("sh-ok"));
      await waitFor("node-2 RUNNING", () => statuses(t, "sh-ok").some((x) => x.state === State.RUNNING));
    }));

  it("crash-loop: runs, then FAILED, every time", () =>
    withFleet({ nodes: 1, faults: ["crash-loop@node-1"] }, async (_fleet, gw) => {
      const s = await registered(gw, "node-1");
      for (let attempt = 1; attempt <= 2; attempt++) {
        gw.command("node-1", start("sh-c"));
        await waitFor(
          `failure ${attempt}`,
          () => statuses(s, "sh-c").filter((x) => x.state === State.FAILED).length === attempt,
        );
      }
      const states = statuses(s, "sh-c").map((x) => x.state);
      assert.deepEqual(states, [
        State.STARTING,
        State.RUNNING,
        State.FAILED,
        State.STARTING,
        State.RUNNING,
        State.FAILED,
      ]);
      const failed = statuses(s, "sh-c").filter((x) => x.state === State.FAILED);
      for (const f of failed) {
        assert.equal(f.exitCode, 134);
        assert.match(f.error, /the engine exited with status 134 \(killed by signal 6\)/);
        assert.match(f.lastOutput, /exited unexpectedly/);
      }
    }));

  it("hang: stays STARTING long past the start delay; a stop still stops it", () =>
    withFleet({ nodes: 1, faults: ["hang@node-1"] }, async (_fleet, gw) => {
      const s = await registered(gw, "node-1");
      gw.command("node-1", start("sh-h"));
      await waitFor("STARTING", () => statuses(s, "sh-h").length > 0);
      const mark = s.messages.length;
      // 20 heartbeats of 50 ms: well past the 150 ms start delay.
      await waitFor("20 more heartbeats", () => heartbeats(s, mark).length >= 20);
      assert.deepEqual(
        statuses(s, "sh-h").map((x) => x.state),
        [State.STARTING],
      );
      gw.command("node-1", { case: "stop", value: { shardId: "sh-h" } });
      await waitFor("STOPPED", () => statuses(s, "sh-h").some((x) => x.state === State.STOPPED));
    }));

  it("slow-start: STARTING for six start delays, then RUNNING", () =>
    withFleet({ nodes: 1, faults: ["slow-start@node-1"] }, async (_fleet, gw) => {
      const s = await registered(gw, "node-1");
      gw.command("node-1", start("sh-slow"));
      await waitFor("STARTING", () => statuses(s, "sh-slow").length > 0);
      const mark = s.messages.length;
      // 10 heartbeats of 50 ms: past three start delays of 150 ms, short of the 900 ms a slow start takes.
      await waitFor("10 more heartbeats", () => heartbeats(s, mark).length >= 10);
      assert.deepEqual(
        statuses(s, "sh-slow").map((x) => x.state),
        [State.STARTING],
      );
      await waitFor("RUNNING", () => statuses(s, "sh-slow").some((x) => x.state === State.RUNNING));
    }));

  it("leak: memory used creeps up with each heartbeat", () =>
    withFleet({ nodes: 1, faults: ["leak@node-1"], leakMbPerHeartbeat: 128 }, async (_fleet, gw) => {
      const s = await registered(gw, "node-1");
      const mark = s.messages.length;
      const hbs = await waitFor("4 heartbeats", () => {
        const h = heartbeats(s, mark);
        return h.length >= 4 ? h.slice(0, 4) : undefined;
      });
      for (let i = 1; i < hbs.length; i++) {
        hbs[i]!.gpuMemoryUsedMb.forEach((mb, gpu) => {
          assert.ok(
            mb > hbs[i - 1]!.gpuMemoryUsedMb[gpu]!,
            `GPU ${gpu}: ${mb} MiB after ${hbs[i - 1]!.gpuMemoryUsedMb[gpu]}`,
          );
        });
      }
    }));

  it("xid: a heartbeat reports the problem on its GPU, the shard on that GPU fails, and a restarted agent does not say it again", () =>
    withFleet({ nodes: 1, faults: ["xid@node-1"], xidAfterHeartbeats: 20 }, async (fleet, gw) => {
      const s = await registered(gw, "node-1");
      gw.command("node-1", start("sh-x", [0, 1, 2, 3, 4, 5, 6, 7]));
      const hb = await waitFor("a heartbeat with a GPU problem", () =>
        heartbeats(s).find((h) => h.gpuProblems.length > 0),
      );
      assert.deepEqual(hb.newProblems, [], "tagged with its GPU, not node-level");
      assert.equal(hb.gpuProblems.length, 1);
      const reported = hb.gpuProblems[0]!;
      assert.equal(reported.kind, GpuProblem_Kind.XID);
      assert.match(
        reported.message,
        new RegExp(`^Xid 79: GPU has fallen off the bus \\(GPU ${reported.gpuIndex}, GPU-`),
      );
      const failed = await waitFor("the shard FAILED", () =>
        statuses(s, "sh-x").find((x) => x.state === State.FAILED),
      );
      // The engine died with its GPU: its last words name the Xid.
      assert.match(failed.lastOutput, /Xid 79/);
      // Reported once: later heartbeats carry no new problem.
      const later = await nextHeartbeat(s);
      assert.deepEqual(later.gpuProblems, []);
      // The GPU stays broken, and the agent's problem ledger outlives its restart: the
      // control plane keeps the problem until an operator clears it, so the new agent
      // does not say it again (a cleared problem stays cleared).
      fleet.restartNode("node-1", { keepShards: true });
      const again = await waitFor("a second stream", () =>
        gw.of("node-1")[1]?.register ? gw.of("node-1")[1] : undefined,
      );
      assert.ok(again.register!.gpus.every((g) => g.problems.length === 0));
      const mark = again.messages.length;
      await waitFor("3 heartbeats after the restart", () => heartbeats(again, mark).length >= 3);
      assert.ok(heartbeats(again).every((h) => h.gpuProblems.length === 0));
    }));

  it("xid with --xid-gpu: the problem is on the GPU named", () =>
    withFleet({ nodes: 1, faults: ["xid@node-1"], xidAfterHeartbeats: 2, xidGpu: 3 }, async (_fleet, gw) => {
      const s = await registered(gw, "node-1");
      const hb = await waitFor("a heartbeat with a GPU problem", () =>
        heartbeats(s).find((h) => h.gpuProblems.length > 0),
      );
      assert.deepEqual(
        hb.gpuProblems.map((p) => [p.gpuIndex, p.kind]),
        [[3, GpuProblem_Kind.XID]],
      );
    }));

  it("partition: goes silent with the stream open, ignores commands, reconnects after the gateway closes it", () =>
    withFleet(
      { nodes: 2, faults: ["partition@node-2"], partitionAfterMs: 300, partitionHealMs: 200 },
      async (fleet, gw) => {
        const events: SimEvent[] = [];
        fleet.on((e) => events.push(e));
        const s = await registered(gw, "node-2");
        const healthy = await registered(gw, "node-1");
        await waitFor("partitioned", () =>
          events.some((e) => e.type === "partitioned" && e.nodeId === "node-2"),
        );
        const count = s.messages.length;
        gw.command("node-2", start("sh-p"));
        const mark = healthy.messages.length;
        await waitFor("10 heartbeats from the healthy node", () => heartbeats(healthy, mark).length >= 10);
        // At most one message was already in flight when the partition began.
        assert.ok(
          s.messages.length <= count + 1,
          `${s.messages.length - count} messages after the partition`,
        );
        assert.equal(results(s).length, 0);
        assert.equal(s.ended, false);
        assert.equal(fleet.summary().partitioned, 1);
        // The gateway gives up on the silent stream; the node comes back, running nothing.
        s.close();
        const again = await waitFor(
          "a new registration",
          () => gw.of("node-2")[1]?.register && gw.of("node-2")[1],
        );
        assert.deepEqual(again.register!.runningShards, []);
        await nextHeartbeat(again);
        assert.ok(fleet.node("node-2")!.counters.reconnects >= 1);
        assert.equal(fleet.summary().partitioned, 0);
      },
    ));

  it("untargeted faults apply to every start; --fault-rate 0 turns them off", async () => {
    await withFleet({ nodes: 2, faults: ["fail"] }, async (_fleet, gw) => {
      for (const id of ["node-1", "node-2"]) {
        const s = await registered(gw, id);
        gw.command(id, start("sh"));
        await waitFor(`${id} FAILED`, () => statuses(s, "sh").some((x) => x.state === State.FAILED));
      }
    });
    await withFleet({ nodes: 1, faults: ["fail"], faultRate: 0 }, async (_fleet, gw) => {
      const s = await registered(gw, "node-1");
      gw.command("node-1", start("sh"));
      await waitFor("RUNNING", () => statuses(s, "sh").some((x) => x.state === State.RUNNING));
    });
  });
});
