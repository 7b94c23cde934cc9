// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the callers' assertions
/**
 * The world the real-agent tests run in: a stack (gateway, `llmgw
 * reconciler` process, operator API) on the test's nats-server, a temp dir
 * for agents' configs, GPUs and engine records, and the `llmgw agent`
 * processes a test starts; plus what such tests ask of it — a node as the
 * API shows it, its registration, its running shards.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import type { NatsServer } from "../harness/nats.js";
import {
  type AgentProc,
  type FakeEngineOptions,
  killRecordedEngines,
  type StartAgentOptions,
  shardStatuses,
  startAgent,
  until,
  writeAgentConfig,
  writeGpus,
} from "./agent-process.js";
import { readAll } from "./gateway.js";
import { type Stack, type StackOptions, startStack } from "./stack.js";

export interface AgentWorld {
  dir: string;
  stack: Stack;
  agents: AgentProc[];
  /** The agents' last output and the stack's story, for a timeout's message. */
  why: () => Promise<string>;
}

/** Runs `body` in a fresh world; agents, engines, the stack and the dir go whatever happens. */
export async function withAgentWorld(
  server: NatsServer,
  o: StackOptions,
  body: (w: AgentWorld) => Promise<void>,
): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), `llmgw-${o.name}-`));
  let stack: Stack | undefined;
  const agents: AgentProc[] = [];
  try {
    stack = await startStack(server.url, o);
    const s = stack;
    const why = async () =>
      `${agents.map((a, i) => `\nagent ${i} output:\n${a.output().slice(-2500)}`).join("")}${await s.why()}`;
    await body({ dir, stack: s, agents, why });
  } finally {
    for (const a of agents) a.proc.kill("SIGKILL");
    killRecordedEngines(dir);
    await stack?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Starts `llmgw agent` on `dir` (the world's own by default) against the world's gateway. */
export function addAgent(
  w: AgentWorld,
  o: Omit<StartAgentOptions, "gateways"> & { gateways?: string[] },
  dir = w.dir,
): AgentProc {
  const agent = startAgent(dir, { gateways: [w.stack.gw.url], ...o });
  w.agents.push(agent);
  return agent;
}

export interface NodeOptions {
  /** The fake nvidia-smi's GPUs (see `writeGpus`); the node is registered once the API lists them all. */
  gpus: object[];
  /** NVLink pairs between them, by place. */
  nvlink?: number[][];
  /** The agent's config: the fake engine's options (see `writeAgentConfig`). */
  config?: FakeEngineOptions;
  /** More environment for the agent process. */
  env?: Record<string, string>;
  /** The node's own folder for its GPUs, config and engine records; the world's by default. */
  dir?: string;
}

/** Writes a node's GPUs and agent config, starts its agent and waits until the API lists it with all its GPUs. */
export async function startNode(w: AgentWorld, nodeId: string, o: NodeOptions): Promise<AgentProc> {
  const dir = o.dir ?? w.dir;
  writeGpus(dir, o.gpus, o.nvlink);
  writeAgentConfig(dir, o.config);
  const agent = addAgent(w, { nodeId, env: o.env }, dir);
  await registered(w, nodeId, o.gpus.length);
  return agent;
}

/** The one-GPU profile the agent tests place, 16 GiB a GPU, with `extra` fields (engine args, env…). */
export const tp1Profile = (extra: object = {}) => ({
  name: "tp1",
  gpusPerShard: 1,
  memoryPerGpu: "16GiB",
  ...extra,
});

/** The model the agent tests place. */
export const MODEL = "qwen-7b";

/** A catalog of MODEL alone, `replicas` of it on `tp1Profile(extra)`. */
export const tp1Catalog = (replicas: number, extra: object = {}) => ({
  models: [{ name: MODEL, replicas, profiles: [tp1Profile(extra)] }],
});

/** A node as `GET /v1/nodes` shows it, or undefined. */
export const nodeView = async (s: Stack, nodeId: string): Promise<any> =>
  ((await s.call("GET", "/v1/nodes")).nodes as any[]).find((n) => n.nodeId === nodeId);

/** Waits until the API lists `nodeId` (with `gpus` GPUs, when given). */
export async function registered(w: AgentWorld, nodeId: string, gpus?: number): Promise<void> {
  await until(
    gpus === undefined ? `${nodeId} registered` : `${nodeId} registered with ${gpus} GPUs`,
    async () => {
      const n = await nodeView(w.stack, nodeId);
      return n && (gpus === undefined || n.gpus?.length === gpus) ? true : undefined;
    },
    { timeoutMs: 30_000, why: w.why },
  );
}

/** The RUNNING statuses of a node, one per shard (its latest), in order of first report. */
export async function runningShards(w: AgentWorld, nodeId: string) {
  const st = shardStatuses(await readAll(w.stack.log), nodeId).filter(
    (x) => x.status.state === State.RUNNING,
  );
  return [...new Map(st.map((x) => [x.status.shardId, x])).values()];
}
