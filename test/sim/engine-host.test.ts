/**
 * Simulated engines under the real engine supervisor: what the supervisor
 * does for a real machine (ports reserved per start, adoption across an
 * agent restart with the exit status recorded while no agent ran) holds
 * for the simulator's faked engines, seen through a real Connect stream.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
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
        second.register!.runningShards.map((x) => x.shardId),
        ["sh-q"],
        "adopted from its record (PID and start time)",
      );
      // The engine ends on its own after the restart: the new agent is not its parent, and
      // learns its status from what was recorded beside its record.
      const failed = await waitFor("FAILED on the new stream", () =>
        statuses(second, "sh-q").find((x) => x.state === State.FAILED),
      );
      assert.equal(failed.exitCode, 0);
      assert.match(failed.error, /the engine exited with code 0/);
    }));
});
