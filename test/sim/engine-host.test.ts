/**
 * Simulated engines under the real engine supervisor: what the supervisor
 * does for a real machine (ports reserved per start, adoption across an
 * agent restart with the exit status recorded while no agent ran) holds
 * for the simulator's faked engines, seen through a real Connect stream.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { parseSimConfig, SIM_ENGINE_PROGRAM, SimEngineHost } from "../../src/sim/index.js";
import { waitFor } from "../support/fake-gateway.js";
import { registered, statuses, withFleet } from "../support/sim.js";

describe("simulated engines under the real engine supervisor", () => {
  it("four starts arriving together on one node get four ports and all reach RUNNING", () =>
    withFleet({ nodes: 1 }, async (_fleet, gw) => {
      const s = await registered(gw, "node-1");
      const ids = ["sh-a", "sh-b", "sh-c", "sh-d"];
      ids.forEach((shardId, gpu) => {
        gw.command("node-1", {
          case: "start",
          value: { shardId, replicaId: `r-${shardId}`, model: "m", gpuIndices: [gpu] },
        });
      });
      const running = await waitFor("four RUNNING", () => {
        const r = ids.map((id) => statuses(s, id).find((x) => x.state === State.RUNNING));
        return r.every((x) => x !== undefined) ? r : undefined;
      });
      const endpoints = running.map((x) => x!.endpoint);
      assert.equal(new Set(endpoints).size, 4, `one port each: ${endpoints.join(" ")}`);
      for (const e of endpoints) assert.match(e, /^http:\/\/node-1:80\d\d$/);
      for (const id of ids) assert.ok(!statuses(s, id).some((x) => x.state === State.FAILED));
    }));

  it("a restarted agent adopts its engines, and learns how one that ended meanwhile ended", () =>
    withFleet({ nodes: 1, faults: ["exit-after-running@node-1"], crashAfterMs: 1500 }, async (fleet, gw) => {
      const first = await registered(gw, "node-1");
      gw.command("node-1", { case: "start", value: { shardId: "sh-q", replicaId: "r-q", gpuIndices: [0] } });
      await waitFor("RUNNING", () => statuses(first, "sh-q").some((x) => x.state === State.RUNNING));
      fleet.restartNode("node-1", { keepShards: true });
      const second = await waitFor("a second registration", () =>
        gw.streams.filter((x) => x.register?.nodeId === "node-1").at(1),
      );
      assert.deepEqual(
        second.register!.runningShards.map((x) => [x.shardId, x.state]),
        [["sh-q", State.RUNNING]],
        "adopted from its record (PID and start time); RUNNING, as its engine answered when asked (the record says STARTING)",
      );
      // The engine ends on its own after the restart: the new agent is not its parent, and
      // learns its status from what was recorded beside its record.
      const failed = await waitFor("FAILED on the new stream", () =>
        statuses(second, "sh-q").find((x) => x.state === State.FAILED),
      );
      assert.equal(failed.exitCode, 0);
      assert.match(failed.error, /the engine exited with code 0/);
    }));

  it("an engine serves once its load has ended by the clock, even before its own timer ran; one stopped while loading never does", async () => {
    const dir = mkdtempSync(join(tmpdir(), "llmgw-sim-host-"));
    const host = new SimEngineHost({
      nodeId: "node-1",
      config: parseSimConfig({ startDelayMs: 50 }),
      faults: { nodeFaults: new Set(), shardFault: () => undefined },
    });
    const launch = (shardId: string, port: number) =>
      host.spawn({
        argv: [SIM_ENGINE_PROGRAM, shardId, `r-${shardId}`, "m", "0", "0", String(port)],
        env: {},
        logFd: -1,
        logPath: join(dir, `${shardId}.log`),
        exitPath: join(dir, `${shardId}.exit`),
      });
    const health = (port: number) =>
      host.fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(1000) });
    try {
      assert.equal((await launch("sh-1", 8000)).ok, true);
      const stopped = await launch("sh-2", 8001);
      assert.ok(stopped.ok);
      await assert.rejects(health(8000), /ECONNREFUSED/, "refused while loading");
      host.signalGroup(stopped.pid, "SIGTERM");
      // The event loop is held past the load's end: the engine's own timer cannot have run.
      const heldUntil = performance.now() + 80;
      while (performance.now() < heldUntil) {}
      const r = await health(8000);
      assert.equal(r.status, 200, "ready by the clock");
      await assert.rejects(health(8001), /ECONNREFUSED/, "stopped while loading: never serves");
    } finally {
      host.clear();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
