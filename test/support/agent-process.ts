// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the callers' assertions
/**
 * The real node agent as tests run it: `llmgw agent` child processes with a
 * fake nvidia-smi (GPUs from a JSON file the test rewrites) and the fake
 * engine, plus what such tests read back from the log — a node's shard
 * statuses and the commands sent for a shard.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import type { LogRecord } from "../../src/log/index.js";
import type { Pem } from "./certs.js";
import { LLMGW_BIN } from "./cli.js";

const ROOT = join(import.meta.dirname, "../..");
export const FAKE_ENGINE = join(ROOT, "examples/agent/fake-engine.mjs");
export const FAKE_SMI = join(ROOT, "test/fixtures/agent/fake-nvidia-smi.mjs");

export interface FakeEngineOptions {
  startDelayMs?: number;
  stopGraceSeconds?: number;
  /** Ask the engine's /drain before a drain's stop. */
  drainHook?: boolean;
  /** The engine's allow lists for what the catalog may add (docs/agent.md). */
  allowedEnv?: string[];
  allowedArgPrefixes?: string[];
  /** The engine holds each OpenAI request this long (--delay-ms). */
  requestDelayMs?: number;
  /** The engine's port range (default: a random one of its own). */
  portRange?: [number, number];
  /** More fields of the engine's config (liveness, metrics, restartPolicy…). */
  engine?: Record<string, unknown>;
  /** More fake-engine flags, after the standard ones. */
  engineFlags?: string[];
  /** The agent config's `engineLogs` (rotation, retention). */
  engineLogs?: Record<string, unknown>;
}

/**
 * Writes `<dir>/agent.yaml`: the fake engine as the default engine, each
 * shard recording its argv, env and pid in `<dir>/<shard_id>.json`.
 */
export function writeAgentConfig(dir: string, o: FakeEngineOptions = {}): string {
  const path = join(dir, "agent.yaml");
  const config = {
    labels: { pool: "test" },
    hardware: { fabrics: [{ name: "ib-pod-1", kind: "infiniband" }] },
    ...(o.engineLogs ? { engineLogs: o.engineLogs } : {}),
    engines: {
      default: {
        command: [
          process.execPath,
          FAKE_ENGINE,
          "--port",
          "{port}",
          "--model",
          "{model}",
          "--tp",
          "{gpu_count}",
          "--start-delay-ms",
          String(o.startDelayMs ?? 1500),
          "--record",
          join(dir, "{shard_id}.json"),
          "--replica",
          "{replica_id}",
          "--shard",
          "{shard_id}",
          ...(o.requestDelayMs !== undefined ? ["--delay-ms", String(o.requestDelayMs)] : []),
          ...(o.engineFlags ?? []),
        ],
        ready: { http: "http://127.0.0.1:{port}/health", intervalMs: 100 },
        ...(o.drainHook ? { drain: { http: "http://127.0.0.1:{port}/drain" } } : {}),
        ...(o.allowedEnv ? { allowedEnv: o.allowedEnv } : {}),
        ...(o.allowedArgPrefixes ? { allowedArgPrefixes: o.allowedArgPrefixes } : {}),
        stopGraceSeconds: o.stopGraceSeconds ?? 1,
        // Each agent its own range: agents pick ports at the same moment.
        portRange: o.portRange ?? [20000 + Math.floor(Math.random() * 20000), 60000],
        ...o.engine,
      },
    },
  };
  writeFileSync(path, JSON.stringify(config));
  return path;
}

/** The fake nvidia-smi's GPUs (see test/fixtures/agent/fake-nvidia-smi.mjs); rewrite to change a sample. */
export function writeGpus(dir: string, gpus: object[], nvlink: number[][] = []): void {
  writeFileSync(join(dir, "gpus.json"), JSON.stringify({ gpus, nvlink }));
}

export interface AgentProc {
  proc: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

export interface StartAgentOptions {
  gateways: string[];
  nodeId: string;
  /** mTLS from these files; without, --insecure-dev. */
  tls?: { cert: string; key: string; ca: string };
  args?: string[];
  /** More environment for the agent process. */
  env?: Record<string, string>;
}

/** Starts `llmgw agent` on `<dir>/agent.yaml`, its state in `<dir>/state`, its kernel log `<dir>/kmsg`. */
export function startAgent(dir: string, o: StartAgentOptions): AgentProc {
  if (!existsSync(join(dir, "kmsg"))) writeFileSync(join(dir, "kmsg"), "");
  const proc = spawn(
    process.execPath,
    [
      LLMGW_BIN,
      "agent",
      "--config",
      join(dir, "agent.yaml"),
      ...o.gateways.flatMap((g) => ["--gateway", g]),
      ...(o.tls ? ["--tls-cert", o.tls.cert, "--tls-key", o.tls.key, "--ca", o.tls.ca] : ["--insecure-dev"]),
      "--node-id",
      o.nodeId,
      "--advertise-address",
      "127.0.0.1",
      "--nvidia-smi",
      FAKE_SMI,
      "--kernel-log",
      join(dir, "kmsg"),
      "--state-dir",
      join(dir, "state"),
      "--heartbeat-ms",
      "500",
      ...(o.args ?? []),
    ],
    {
      env: {
        ...process.env,
        PATH: `${dirname(process.execPath)}:${process.env["PATH"]}`,
        FAKE_NVIDIA_SMI_STATE: join(dir, "gpus.json"),
        ...o.env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  proc.stdout!.on("data", (b) => (out += b));
  proc.stderr!.on("data", (b) => (out += b));
  const exited = new Promise<number | null>((r) => proc.once("exit", (code) => r(code)));
  return { proc, output: () => out, exited };
}

/** Writes a client certificate as the files an agent reads (and re-reads when they change). */
export function writeAgentCerts(
  dir: string,
  pem: Pem,
  ca: string,
): { cert: string; key: string; ca: string } {
  const files = { cert: join(dir, "agent.crt"), key: join(dir, "agent.key"), ca: join(dir, "ca.crt") };
  writeFileSync(files.key, pem.key);
  writeFileSync(files.cert, pem.cert);
  writeFileSync(files.ca, ca);
  return files;
}

/** Polls `check` until it returns a value; on timeout fails naming what hung, with `why()`'s story. */
export async function until<T>(
  what: string,
  check: () => Promise<T | undefined>,
  o: { timeoutMs: number; why: () => Promise<string> },
): Promise<T> {
  const deadline = Date.now() + o.timeoutMs;
  for (;;) {
    const v = await check().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${await o.why()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Whether a process runs: a zombie (exited, its status not yet reaped by its parent) does not. */
export const pidAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
};

/** The shard statuses a node reported, in log order. */
export function shardStatuses(records: LogRecord[], nodeId: string) {
  return records.flatMap((r) =>
    r.event.body.case === "shardStatus" && r.event.body.value.nodeId === nodeId
      ? [{ seq: r.seq, ms: Number(r.event.timeUnixMs), status: r.event.body.value.status! }]
      : [],
  );
}

/** The first status of `state` a node reported (for `shardId`, when given). */
export function firstStatus(
  records: LogRecord[],
  nodeId: string,
  state: ShardStatus_State,
  shardId?: string,
) {
  return shardStatuses(records, nodeId).find(
    (x) => x.status.state === state && (shardId === undefined || x.status.shardId === shardId),
  );
}

/** Start, stop and drain commands sent for a shard after `afterSeq`. */
export function commandsFor(records: LogRecord[], shardId: string, afterSeq: number) {
  return records.flatMap((r) =>
    r.seq > afterSeq && r.event.body.case === "reconcilePass"
      ? r.event.body.value.commands.filter(
          (c) =>
            (c.action.case === "start" || c.action.case === "stop" || c.action.case === "drain") &&
            c.action.value.shardId === shardId,
        )
      : [],
  );
}

/** What the fake engine of a shard recorded at its start: argv, env, pid. */
export function engineRecord(dir: string, shardId: string): { argv: string[]; env: any; pid: number } {
  return JSON.parse(readFileSync(join(dir, `${shardId}.json`), "utf8"));
}

/** The UUID the fake nvidia-smi gives the GPU in place `i` (unless a test names one). */
export function fakeGpuUuid(i: number): string {
  return `GPU-${String(i).padStart(8, "0")}-aaaa-bbbb-cccc-${String(i).padStart(12, "0")}`;
}

/**
 * The places (as `writeGpus` lists them) of the fake nvidia-smi's GPUs a
 * shard's engine was given: its CUDA_VISIBLE_DEVICES names them by UUID.
 */
export function engineGpus(dir: string, shardId: string): number[] {
  const visible = String(engineRecord(dir, shardId).env.CUDA_VISIBLE_DEVICES ?? "");
  return visible.split(",").map((uuid) => {
    const m = /^GPU-(\d{8})-aaaa-bbbb-cccc-\d{12}$/.exec(uuid);
    if (!m) throw new Error(`CUDA_VISIBLE_DEVICES names ${JSON.stringify(uuid)}, not a fake GPU's UUID`);
    return Number(m[1]);
  });
}

/**
 * Kills every engine any agent started under `dir` or its folders (each
 * wrote a record), with the process group it runs in (the agent's wrapper
 * leads it): none outlives a test.
 */
export function killRecordedEngines(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      killRecordedEngines(path);
      continue;
    }
    if (!entry.name.endsWith(".json") || entry.name === "gpus.json") continue;
    let pid: number;
    try {
      pid = JSON.parse(readFileSync(path, "utf8")).pid;
    } catch {
      continue;
    }
    if (!Number.isInteger(pid)) continue;
    for (const target of [-processGroup(pid), pid]) {
      try {
        process.kill(target, "SIGKILL");
      } catch {}
    }
  }
}

/** A process's group (field 5 of /proc/<pid>/stat), or the PID itself when it is gone. */
function processGroup(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const pgid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]);
    return Number.isInteger(pgid) && pgid > 1 ? pgid : pid;
  } catch {
    return pid;
  }
}
