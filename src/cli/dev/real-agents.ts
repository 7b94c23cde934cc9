/**
 * `llmgw dev --agents real`: the real node agent on every dev node instead of
 * the simulator, with GPUs from a file (8 × H100 80 GB) and the fake engine
 * (examples/agent/fake-engine.mjs) as the "inference engine", so the agent
 * can be watched at work on a machine without GPUs.
 */
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { processStartTime } from "../../agent/index.js";
import { PACKAGE_ROOT } from "../../package-root.js";
import type { Children } from "./children.js";

const LLMGW = join(PACKAGE_ROOT, "bin/llmgw.js");
const FAKE_ENGINE = join(PACKAGE_ROOT, "examples/agent/fake-engine.mjs");

export interface RealAgentsOptions {
  dataDir: string;
  nodes: number;
  gpusPerNode: number;
  gatewayUrl: string;
  startDelayMs: number;
  env: NodeJS.ProcessEnv;
}

/** Starts one `llmgw agent` per node; resolves with the state directories (for stopping the engines). */
export async function startRealAgents(children: Children, o: RealAgentsOptions): Promise<string[]> {
  const stateDirs: string[] = [];
  for (let i = 1; i <= o.nodes; i++) {
    const nodeId = `gpu-${i}`;
    const dir = join(o.dataDir, "agents", nodeId);
    await mkdir(dir, { recursive: true });
    const gpus = Array.from({ length: o.gpusPerNode }, (_, g) => ({
      index: g,
      uuid: `GPU-${String(i).padStart(4, "0")}${String(g).padStart(4, "0")}-0000-4000-8000-000000000000`,
      product: "NVIDIA H100 80GB HBM3",
      memoryTotalMb: 81559,
      memoryUsedMb: 0,
    }));
    await writeFile(join(dir, "gpus.json"), JSON.stringify(gpus, null, 2));
    const base = 20_000 + i * 100;
    const config = {
      stateDir: join(dir, "state"),
      hardware: {
        nvlink: [gpus.map((g) => g.index)],
        fabrics: [{ name: `ib-pod-${Math.ceil(i / 4)}`, kind: "infiniband" }],
      },
      engines: {
        default: {
          command: [
            process.execPath,
            FAKE_ENGINE,
            "--port",
            "{port}",
            "--start-delay-ms",
            String(o.startDelayMs),
            // Named in its OpenAI answers, so requests through the router show where they went.
            "--model",
            "{model}",
            "--replica",
            "{replica_id}",
            "--shard",
            "{shard_id}",
          ],
          ready: { http: "http://127.0.0.1:{port}/health", intervalMs: 250 },
          stopGraceSeconds: 2,
          // Each node its own range: the agents pick ports at the same moment.
          portRange: [base, base + 99],
        },
      },
    };
    await writeFile(join(dir, "agent.json"), JSON.stringify(config, null, 2));
    stateDirs.push(config.stateDir);
    children.start(
      nodeId,
      process.execPath,
      [
        LLMGW,
        "agent",
        "--config",
        join(dir, "agent.json"),
        "--gateway",
        o.gatewayUrl,
        "--insecure-dev",
        "--node-id",
        nodeId,
        "--advertise-address",
        "127.0.0.1",
        "--gpus-from",
        join(dir, "gpus.json"),
        "--heartbeat-ms",
        "2000",
      ],
      o.env,
    );
  }
  return stateDirs;
}

/** The state directories of the real agents dev ran under `dataDir` (this run's or an earlier one's). */
export async function realAgentStateDirs(dataDir: string): Promise<string[]> {
  const root = join(dataDir, "agents");
  const nodes = await readdir(root).catch(() => [] as string[]);
  return nodes.map((n) => join(root, n, "state"));
}

/** An engine the records name that still runs: its PID alive with the recorded start time (never a reused PID). */
interface LiveEngine {
  shardId: string;
  pid: number;
}

async function liveEngines(stateDirs: readonly string[]): Promise<LiveEngine[]> {
  const out: LiveEngine[] = [];
  for (const dir of stateDirs) {
    const shards = join(dir, "shards");
    const names = await readdir(shards).catch(() => [] as string[]);
    for (const name of names.filter((f) => f.endsWith(".json"))) {
      try {
        const r = JSON.parse(await readFile(join(shards, name), "utf8")) as {
          pid: number;
          startTime: string;
        };
        if (Number.isInteger(r.pid) && r.pid > 1 && (await processStartTime(r.pid)) === r.startTime)
          out.push({ shardId: name.slice(0, -".json".length), pid: r.pid });
      } catch {
        // A record half gone: its engine, if any, is the agent's to find.
      }
    }
  }
  return out;
}

/**
 * Engines outlive their agents by design (a node agent restarted adopts
 * them), so dev leaves them running when it stops: how many still run.
 */
export async function countRealEngines(stateDirs: readonly string[]): Promise<number> {
  return (await liveEngines(stateDirs)).length;
}

/**
 * Ends the engines the records name (`llmgw dev --stop-engines`): SIGTERM
 * to each one's process group, SIGKILL to those still running after
 * `graceMs`. Resolves with how many there were.
 */
export async function stopRealEngines(stateDirs: readonly string[], graceMs = 5000): Promise<number> {
  const engines = await liveEngines(stateDirs);
  const signal = (pid: number, sig: NodeJS.Signals) => {
    try {
      process.kill(-pid, sig);
    } catch {
      // Gone already.
    }
  };
  for (const e of engines) signal(e.pid, "SIGTERM");
  const deadline = Date.now() + graceMs;
  let left = engines;
  while (left.length > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    left = await liveEngines(stateDirs);
  }
  for (const e of left) signal(e.pid, "SIGKILL");
  return engines.length;
}
