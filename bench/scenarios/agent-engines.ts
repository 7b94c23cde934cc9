/**
 * The node agent's engine supervisor on a busy node, with real engine
 * processes (the fake engine):
 *   - a start storm: 8 StartShards at once on one node, from the first
 *     start to all 8 RUNNING (ports reserved, spawned, probed ready);
 *   - steady state: the supervisor's CPU and RSS while it supervises the 8
 *     engines, their metrics read every 500 ms and their liveness probed
 *     every second (this process, which runs nothing else meanwhile).
 * The raw limit beside the storm is one engine alone, start to RUNNING.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EngineSupervisor, enginesSchema, type ShardEvent } from "../../src/agent/index.js";
import { figure, type Scenario } from "../support/result.js";

const FAKE_ENGINE = join(import.meta.dirname, "../../examples/agent/fake-engine.mjs");
const ENGINES = 8;

const spec = (shardId: string, gpu: number) => ({
  shardId,
  replicaId: `r-${shardId}`,
  model: "m",
  profile: "p",
  engine: "default",
  gpuIndices: [gpu],
  gpuUuids: [`GPU-bench-${gpu}`],
  engineArgs: ["--waiting", "3"],
  engineEnv: {},
  rank: 0,
  worldSize: 1,
  masterAddr: "",
  masterPort: 0,
});

async function allRunning(events: ShardEvent[], ids: string[], timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!ids.every((id) => events.some((e) => e.shardId === id && e.state === "running"))) {
    const failed = events.find((e) => e.state === "failed");
    if (failed) throw new Error(`shard ${failed.shardId} failed: ${failed.error}`);
    if (performance.now() > deadline) throw new Error(`not all of ${ids.join(", ")} RUNNING in time`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export const agentEngines: Scenario = {
  name: "agent-engines",
  describe: "node agent supervisor: a start storm of 8 shards on one node; CPU and RSS supervising 8 engines",
  async run(ctx) {
    const steadyMs = ctx.quick ? 2_000 : 30_000;
    const dir = mkdtempSync(join(tmpdir(), "llmgw-bench-agent-"));
    const events: ShardEvent[] = [];
    const sup = new EngineSupervisor({
      engines: enginesSchema.parse({
        default: {
          command: [process.execPath, FAKE_ENGINE, "--port", "{port}"],
          ready: { http: "http://127.0.0.1:{port}/health", intervalMs: 50 },
          liveness: { intervalMs: 1000 },
          metrics: { intervalMs: 500 },
          stopGraceSeconds: 2,
          portRange: [30000 + Math.floor(Math.random() * 20000), 60000],
        },
      }),
      stateDir: dir,
      advertiseHost: "127.0.0.1",
      onEvent: (e) => events.push(e),
    });
    await sup.adopt();
    try {
      ctx.progress("one engine alone");
      let t = performance.now();
      await sup.start(spec("alone", 0));
      await allRunning(events, ["alone"], 60_000);
      const aloneMs = performance.now() - t;
      await sup.stopAll();

      ctx.progress(`a storm of ${ENGINES} starts`);
      const ids = Array.from({ length: ENGINES }, (_, i) => `storm-${i}`);
      t = performance.now();
      const outcomes = await Promise.all(ids.map((id, i) => sup.start(spec(id, i))));
      const refused = outcomes.find((o) => !o.ok);
      if (refused && !refused.ok) throw new Error(`a start was refused: ${refused.error}`);
      await allRunning(events, ids, 120_000);
      const stormMs = performance.now() - t;
      const ports = new Set(events.filter((e) => e.state === "running" && e.endpoint).map((e) => e.endpoint));

      ctx.progress(`supervising ${ENGINES} engines for ${steadyMs / 1000} s`);
      // Let the first readings settle, then measure.
      await new Promise((r) => setTimeout(r, 1000));
      const cpu0 = process.cpuUsage();
      const w0 = performance.now();
      let rssMax = 0;
      while (performance.now() - w0 < steadyMs) {
        rssMax = Math.max(rssMax, process.memoryUsage().rss);
        await new Promise((r) => setTimeout(r, 250));
      }
      const cpu = process.cpuUsage(cpu0);
      const cores = (cpu.user + cpu.system) / 1000 / (performance.now() - w0);
      const loads = sup.loads().length;
      return {
        params: { engines: ENGINES, metricsIntervalMs: 500, livenessIntervalMs: 1000, steadyMs },
        figures: [
          figure(`start storm: ${ENGINES} shards to all RUNNING`, Math.round(stormMs), "ms", {
            raw: { name: "one engine alone", value: Math.round(aloneMs) },
            higherIsBetter: false,
          }),
          figure(`supervisor CPU, ${ENGINES} engines`, Number((cores * 100).toFixed(2)), "% of a core", {
            higherIsBetter: false,
          }),
          figure("supervisor process RSS (max)", Math.round(rssMax / 2 ** 20), "MiB", {
            higherIsBetter: false,
          }),
        ],
        notes: [
          `${ports.size} distinct endpoints for ${ENGINES + 1} starts; ${loads} of ${ENGINES} shards reporting load`,
        ],
      };
    } finally {
      await sup.stopAll();
      await sup.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
