// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the assertions
/**
 * The real node agent when its hardware changes, with every real part of
 * the control plane (nats-server, a gateway, a `llmgw reconciler` process,
 * the operator API) and a fake nvidia-smi: a GPU that stops being listed
 * leads to a re-registration on the live stream without it, its shard
 * FAILED with the reason and placed again on a GPU that is there; a
 * problem an operator cleared stays cleared through an agent restart, and
 * comes back only on a new occurrence.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import type { LogRecord } from "../../src/log/index.js";
import { type NatsServer, startServer } from "../harness/nats.js";
import {
  commandsFor,
  engineGpus,
  shardStatuses,
  until,
  writeAgentConfig,
  writeGpus,
} from "../support/agent-process.js";
import { addAgent, nodeView, startNode, tp1Catalog, withAgentWorld } from "../support/agent-world.js";
import { readAll } from "../support/gateway.js";

/** The registrations a node made, in log order: the session's first, then re-registrations on it. */
function registrations(records: LogRecord[], nodeId: string) {
  return records.flatMap((r) => {
    const b = r.event.body;
    if ((b.case === "sessionOpened" || b.case === "hardwareChanged") && b.value.nodeId === nodeId)
      return [
        { seq: r.seq, kind: b.case, sessionId: b.value.sessionId, registration: b.value.registration! },
      ];
    return [];
  });
}

/** The GPU problems a node reported in heartbeats after `afterSeq`, as "index message". */
function reportedProblems(records: LogRecord[], nodeId: string, afterSeq = 0): string[] {
  return records.flatMap((r) =>
    r.seq > afterSeq && r.event.body.case === "usageChanged" && r.event.body.value.nodeId === nodeId
      ? r.event.body.value.gpuProblems.map((p) => `${p.gpuIndex} ${p.message}`)
      : [],
  );
}

describe("llmgw agent when the hardware changes (real processes)", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("a GPU nvidia-smi stops listing: re-registration without it on the live stream, its shard FAILED and placed again", async () => {
    await withAgentWorld(
      server,
      { name: "aghwgone", reconciler: { crashBackoffBaseMs: 300, cooldownMs: 0 } },
      async (w) => {
        const node = "gpu-gone";
        await startNode(w, node, { gpus: [{}, {}, {}], config: { startDelayMs: 200 } });
        await w.stack.call("PUT", "/v1/catalog", tp1Catalog(1));
        const first = await until(
          "the shard RUNNING",
          async () =>
            shardStatuses(await readAll(w.stack.log), node).find((x) => x.status.state === State.RUNNING),
          { timeoutMs: 30_000, why: w.why },
        );
        const shardId = first.status.shardId;
        const gpu = engineGpus(w.dir, shardId)[0]!;
        const before = registrations(await readAll(w.stack.log), node);

        // The GPU falls off the bus: nvidia-smi lists the others only (the ones behind it move up).
        writeGpus(
          w.dir,
          [0, 1, 2].map((i) => (i === gpu ? { gone: true } : {})),
        );
        const again = await until(
          "a re-registration without the GPU",
          async () =>
            registrations(await readAll(w.stack.log), node).find(
              (r) => r.seq > first.seq && r.kind === "hardwareChanged",
            ),
          { timeoutMs: 20_000, why: w.why },
        );
        assert.equal(again.sessionId, before.at(-1)?.sessionId, "on the live stream: the same session");
        assert.deepEqual(
          again.registration.gpus.map((g) => g.index),
          [0, 1, 2].filter((i) => i !== gpu),
          "the GPUs that remain keep their indices",
        );
        assert.ok(
          !again.registration.runningShards.some((s) => s.shardId === shardId),
          "the shard on the gone GPU is not registered as running",
        );
        const failed = await until(
          "the shard FAILED with the reason",
          async () =>
            shardStatuses(await readAll(w.stack.log), node).find(
              (x) => x.status.shardId === shardId && x.status.state === State.FAILED,
            ),
          { timeoutMs: 20_000, why: w.why },
        );
        assert.match(
          failed.status.error,
          new RegExp(`GPU ${gpu} \\(GPU-[0-9a-f-]+\\) is no longer listed by nvidia-smi`),
        );

        const moved = await until(
          "a replacement RUNNING",
          async () =>
            shardStatuses(await readAll(w.stack.log), node).find(
              (x) => x.seq > failed.seq && x.status.state === State.RUNNING && x.status.shardId !== shardId,
            ),
          { timeoutMs: 40_000, why: w.why },
        );
        const starts = commandsFor(await readAll(w.stack.log), moved.status.shardId, 0).filter(
          (c) => c.action.case === "start",
        );
        assert.equal(starts.length, 1);
        const placedOn = starts[0]!.action.case === "start" ? starts[0]!.action.value.gpuIndices : [];
        assert.ok(placedOn.length === 1 && placedOn[0] !== gpu, `placed on a GPU that is there, not ${gpu}`);
        const view = await nodeView(w.stack, node);
        assert.deepEqual(
          view.gpus.map((g: any) => g.index),
          [0, 1, 2].filter((i) => i !== gpu),
        );
      },
    );
  });

  it("nvidia-smi failing sampleFailureThreshold times in a row is a node problem, not frozen figures", async () => {
    await withAgentWorld(server, { name: "aghwsmi" }, async (w) => {
      const node = "gpu-smi";
      await startNode(w, node, { gpus: [{}], config: { startDelayMs: 200 } });
      writeFileSync(join(w.dir, "gpus.json"), JSON.stringify({ gpus: [{}], mode: "fail" }));
      const view = await until(
        "the node problem",
        async () => {
          const n = await nodeView(w.stack, node);
          return n?.nodeProblems?.length > 0 ? n : undefined;
        },
        { timeoutMs: 20_000, why: w.why },
      );
      assert.equal(view.nodeProblems.length, 1, "once per run of failures");
      assert.match(
        view.nodeProblems[0],
        /^nvidia-smi failed 3 times in a row \(GPU figures are stale\): nvidia-smi at .* exited with code 9: "NVIDIA-SMI has failed/,
      );
    });
  });

  it("gpu clear sticks through an agent restart; the problem is reported again only on a new occurrence", async () => {
    await withAgentWorld(server, { name: "aghwclear" }, async (w) => {
      const node = "gpu-clear";
      writeGpus(w.dir, [{ ecc: 2 }, {}]);
      writeAgentConfig(w.dir, { startDelayMs: 200 });
      const start = () => addAgent(w, { nodeId: node });
      const agent = start();
      const faultOn0 = (message: RegExp) => async () => {
        const g = (await nodeView(w.stack, node))?.gpus?.[0];
        return g?.faults?.some((f: any) => f.kind === "ecc" && message.test(f.message)) ? g : undefined;
      };
      await until("GPU 0 reported with 2 ECC errors", faultOn0(/^2 uncorrectable ECC errors$/), {
        timeoutMs: 30_000,
        why: w.why,
      });
      const cleared = await w.stack.call("POST", `/v1/nodes/${node}/gpus/0/clear`, { reason: "reseated" });
      const clearedSeq = Number(cleared.seq);
      assert.deepEqual((await nodeView(w.stack, node)).gpus[0].faults, []);

      // The agent restarts (a new process, a new session): nvidia-smi still says 2 errors.
      agent.proc.kill("SIGTERM");
      await agent.exited;
      const sessionsBefore = registrations(await readAll(w.stack.log), node).filter(
        (r) => r.kind === "sessionOpened",
      ).length;
      start();
      await until(
        "the restarted agent registered",
        async () =>
          registrations(await readAll(w.stack.log), node).filter((r) => r.kind === "sessionOpened").length >
          sessionsBefore
            ? true
            : undefined,
        { timeoutMs: 30_000, why: w.why },
      );
      // A new occurrence: the counter rises. It is reported; the cleared one is not, before or with it.
      writeGpus(w.dir, [{ ecc: 3 }, {}]);
      await until("GPU 0 reported with 3 ECC errors", faultOn0(/^3 uncorrectable ECC errors$/), {
        timeoutMs: 30_000,
        why: w.why,
      });
      const records = await readAll(w.stack.log);
      assert.deepEqual(
        reportedProblems(records, node, clearedSeq),
        ["0 3 uncorrectable ECC errors"],
        "after the clear, only the new occurrence was reported",
      );
      const g0 = (await nodeView(w.stack, node)).gpus[0];
      assert.deepEqual(
        [g0.problems, g0.faults.map((f: any) => f.message)],
        [[], ["3 uncorrectable ECC errors"]],
        "nor did the restarted agent's registration bring the cleared problem back",
      );
      assert.deepEqual(
        registrations(records, node)
          .filter((r) => r.seq > clearedSeq)
          .flatMap((r) => r.registration.gpus.flatMap((g) => g.problems)),
        [],
      );
    });
  });
});
