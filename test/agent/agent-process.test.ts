// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the assertions
/**
 * The real node agent (`llmgw agent` processes) with every real part of the
 * control plane: nats-server, a gateway, a `llmgw reconciler` process and the
 * operator API; a fake nvidia-smi and the fake engine stand in for the GPUs
 * and vLLM. A catalog applied starts the engine with the templated argv, env
 * and CUDA_VISIBLE_DEVICES; the shard is RUNNING only once its health answers,
 * and routed. The agent killed with SIGKILL and started again adopts the
 * same engine process: no start or stop is sent for it.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import type { LogRecord } from "../../src/log/index.js";
import { type NatsServer, startServer } from "../harness/nats.js";
import { LLMGW_BIN } from "../support/cli.js";
import { readAll } from "../support/gateway.js";
import { type Stack, startStack } from "../support/stack.js";

const ROOT = join(import.meta.dirname, "../..");
const FAKE_ENGINE = join(ROOT, "examples/agent/fake-engine.mjs");
const FAKE_SMI = join(ROOT, "test/fixtures/agent/fake-nvidia-smi.mjs");
const MODEL = "qwen-7b";
const NODE = "gpu-a1";

function agentConfig(dir: string): string {
  const path = join(dir, "agent.yaml");
  const config = {
    labels: { pool: "test" },
    hardware: { fabrics: [{ name: "ib-pod-1", kind: "infiniband" }] },
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
          "1500",
          "--record",
          join(dir, "{shard_id}.json"),
        ],
        ready: { http: "http://127.0.0.1:{port}/health", intervalMs: 100 },
        stopGraceSeconds: 1,
        portRange: [20000 + Math.floor(Math.random() * 20000), 60000],
      },
    },
  };
  writeFileSync(path, JSON.stringify(config));
  return path;
}

interface AgentProc {
  proc: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

function startAgent(dir: string, gatewayUrl: string): AgentProc {
  const proc = spawn(
    process.execPath,
    [
      LLMGW_BIN,
      "agent",
      "--config",
      join(dir, "agent.yaml"),
      "--gateway",
      gatewayUrl,
      "--insecure-dev",
      "--node-id",
      NODE,
      "--advertise-address",
      "127.0.0.1",
      "--nvidia-smi",
      FAKE_SMI,
      "--state-dir",
      join(dir, "state"),
      "--heartbeat-ms",
      "500",
    ],
    {
      env: {
        ...process.env,
        PATH: `${dirname(process.execPath)}:${process.env["PATH"]}`,
        FAKE_NVIDIA_SMI_STATE: join(dir, "gpus.json"),
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

/** Polls `check` until it returns a value; on timeout fails naming what hung, with `why()`'s story. */
async function until<T>(
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

const pidAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

function statuses(records: LogRecord[]) {
  return records.flatMap((r) =>
    r.event.body.case === "shardStatus" && r.event.body.value.nodeId === NODE
      ? [{ seq: r.seq, ms: Number(r.event.timeUnixMs), status: r.event.body.value.status! }]
      : [],
  );
}

function commandsFor(records: LogRecord[], shardId: string, afterSeq: number) {
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

describe("llmgw agent: engines started, ready, routed and adopted across a restart (real processes)", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("starts the engine as templated, reports RUNNING after its health answers, and adopts it after kill -9", async () => {
    const dir = mkdtempSync(join(tmpdir(), "llmgw-agent-"));
    writeFileSync(join(dir, "gpus.json"), JSON.stringify({ gpus: [{}, {}], nvlink: [[0, 1]] }));
    agentConfig(dir);
    let stack: Stack | undefined;
    let agent: AgentProc | undefined;
    let enginePid: number | undefined;
    try {
      stack = await startStack(server.url, { name: "agentp" });
      const s = stack;
      agent = startAgent(dir, s.gw.url);
      const a = agent;
      const why = async () => `\nagent output:\n${a.output().slice(-3000)}${await s.why()}`;
      await until(
        "the node registered",
        async () => {
          const nodes = (await s.call("GET", "/v1/nodes")).nodes as any[];
          return nodes.find((n) => n.nodeId === NODE && n.gpus?.length === 2) ? true : undefined;
        },
        { timeoutMs: 30_000, why },
      );

      await s.call("PUT", "/v1/catalog", {
        models: [
          {
            name: MODEL,
            replicas: 1,
            profiles: [
              {
                name: "tp1",
                gpusPerShard: 1,
                memoryPerGpu: "16GiB",
                engineArgs: ["--served-model-name", "qwen"],
                engineEnv: { FAKE_ENGINE_PROFILE: "tp1" },
              },
            ],
          },
        ],
      });

      const running = await until(
        "the shard RUNNING in the log",
        async () => {
          const st = statuses(await readAll(s.log));
          return st.find((x) => x.status.state === State.RUNNING);
        },
        { timeoutMs: 30_000, why },
      );
      const shardId = running.status.shardId;
      const all = statuses(await readAll(s.log)).filter((x) => x.status.shardId === shardId);
      const starting = all.find((x) => x.status.state === State.STARTING);
      assert.ok(starting && starting.seq < running.seq, "STARTING was reported before RUNNING");
      assert.ok(
        running.ms - starting.ms >= 1000,
        `RUNNING ${running.ms - starting.ms} ms after STARTING although the engine answers /health only after 1500 ms`,
      );

      const rec = JSON.parse(readFileSync(join(dir, `${shardId}.json`), "utf8"));
      enginePid = rec.pid as number;
      const argv = rec.argv as string[];
      const port = argv[argv.indexOf("--port") + 1];
      assert.deepEqual(argv.slice(argv.indexOf("--model"), argv.indexOf("--model") + 4), [
        "--model",
        MODEL,
        "--tp",
        "1",
      ]);
      assert.deepEqual(
        argv.slice(-2),
        ["--served-model-name", "qwen"],
        "the profile's engine_args are appended",
      );
      assert.equal(rec.env.FAKE_ENGINE_PROFILE, "tp1");
      assert.match(rec.env.CUDA_VISIBLE_DEVICES, /^[01]$/);
      assert.equal(running.status.endpoint, `http://127.0.0.1:${port}`);
      assert.equal((await fetch(`${running.status.endpoint}/health`)).status, 200);

      await until(
        "the endpoint in the routing table",
        async () => {
          const t = (await s.call("GET", "/v1/endpoints")) as any;
          return JSON.stringify(t).includes(running.status.endpoint) ? true : undefined;
        },
        { timeoutMs: 20_000, why },
      );

      // The agent dies; its engine must not.
      a.proc.kill("SIGKILL");
      await a.exited;
      assert.ok(pidAlive(enginePid), "the engine outlived its agent");
      const killedAt = (await readAll(s.log)).at(-1)!.seq;
      agent = startAgent(dir, s.gw.url);
      const again = await until(
        "a new session registering the running shard",
        async () => {
          const recs = await readAll(s.log);
          return recs.find(
            (r) =>
              r.seq > killedAt &&
              r.event.body.case === "sessionOpened" &&
              r.event.body.value.nodeId === NODE &&
              r.event.body.value.registration?.runningShards.some((x) => x.shardId === shardId),
          );
        },
        { timeoutMs: 30_000, why },
      );
      const reg =
        again.event.body.case === "sessionOpened" ? again.event.body.value.registration! : undefined;
      const adopted = reg!.runningShards.find((x) => x.shardId === shardId)!;
      assert.equal(adopted.state, State.RUNNING);
      assert.equal(adopted.endpoint, running.status.endpoint);
      // A pass that saw the new session: adoption has been decided.
      await until(
        "a reconcile pass after the new session",
        async () => {
          const recs = await readAll(s.log);
          return recs.some((r) => r.seq > again.seq && r.event.body.case === "reconcilePass")
            ? true
            : undefined;
        },
        { timeoutMs: 30_000, why },
      );
      const recs = await readAll(s.log);
      assert.deepEqual(
        commandsFor(recs, shardId, killedAt),
        [],
        "no start, stop or drain for the adopted shard",
      );
      assert.equal(
        JSON.parse(readFileSync(join(dir, `${shardId}.json`), "utf8")).pid,
        enginePid,
        "the engine was not started again",
      );
      assert.ok(pidAlive(enginePid), "the same engine process still runs");
      const ready = (await s.call("GET", "/v1/replicas")).models.find((m: any) => m.model === MODEL);
      assert.equal(ready.ready, 1, "the adopted replica is still ready");
    } finally {
      agent?.proc.kill("SIGKILL");
      // Every engine any agent started here wrote a record: none outlives the test.
      for (const f of readdirSync(dir).filter((n) => n.endsWith(".json") && n !== "gpus.json")) {
        try {
          process.kill(-JSON.parse(readFileSync(join(dir, f), "utf8")).pid, "SIGKILL");
        } catch {}
      }
      await stack?.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
