/**
 * The engine supervisor with real processes (the fake engine): idempotent
 * starts, a crash reported FAILED with its exit code and last output, a
 * SIGTERM-ignoring engine killed after the grace, a drain ended by its
 * deadline, and adoption that never takes a reused PID.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import {
  EngineSupervisor,
  enginesSchema,
  loadOfMetricsText,
  READY_INTERVAL_MS,
  type ShardEvent,
  type SupervisorOptions,
  startTimeOfStat,
  visibleDevices,
} from "../../src/agent/index.js";

const FAKE_ENGINE = join(import.meta.dirname, "../../examples/agent/fake-engine.mjs");

function engines(
  extra: string[],
  stopGraceSeconds = 1,
  portRange?: [number, number],
  more: Record<string, unknown> = {},
) {
  return enginesSchema.parse({
    default: {
      command: [process.execPath, FAKE_ENGINE, "--port", "{port}", ...extra],
      ready: { http: "http://127.0.0.1:{port}/health", intervalMs: 50 },
      stopGraceSeconds,
      portRange: portRange ?? [30000 + Math.floor(Math.random() * 20000), 60000],
      ...more,
    },
  });
}

const spec = (shardId: string) => ({
  shardId,
  replicaId: `r-${shardId}`,
  model: "m",
  profile: "p",
  engine: "default",
  gpuIndices: [0, 1],
  gpuUuids: ["GPU-1f6a0c3e-0000-4000-8000-000000000000", "GPU-1f6a0c3e-0000-4000-8000-000000000001"],
  engineArgs: [],
  engineEnv: {},
  rank: 0,
  worldSize: 1,
  masterAddr: "",
  masterPort: 0,
});

async function until<T>(what: string, check: () => T | undefined): Promise<T> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const v = check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Kills the process group of every engine `s` started, closes it and removes its state dir `dir`. */
async function discardSupervisor(s: EngineSupervisor, dir: string): Promise<void> {
  for (const pid of Object.values(s.pids())) {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {}
  }
  await s.close();
  rmSync(dir, { recursive: true, force: true });
}

/** A supervisor of the default fake engine on the state directory `dir`: an agent (re)started on a node. */
function supervisorOn(
  dir: string,
  onEvent: (e: ShardEvent) => void,
  more: Partial<SupervisorOptions> = {},
): EngineSupervisor {
  return new EngineSupervisor({
    engines: engines([]),
    stateDir: dir,
    advertiseHost: "127.0.0.1",
    onEvent,
    ...more,
  });
}

async function withSupervisor(
  extra: string[],
  fn: (s: EngineSupervisor, events: ShardEvent[], dir: string) => Promise<void>,
  grace = 1,
  o: {
    portRange?: [number, number];
    baseEnv?: NodeJS.ProcessEnv;
    engine?: Record<string, unknown>;
    onLoadFailure?: SupervisorOptions["onLoadFailure"];
  } = {},
): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "llmgw-sup-"));
  const events: ShardEvent[] = [];
  const s = new EngineSupervisor({
    engines: engines(extra, grace, o.portRange, o.engine),
    ...(o.onLoadFailure ? { onLoadFailure: o.onLoadFailure } : {}),
    stateDir: dir,
    advertiseHost: "127.0.0.1",
    onEvent: (e) => events.push(e),
    watchMs: 50,
    ...(o.baseEnv ? { baseEnv: o.baseEnv } : {}),
  });
  await s.adopt();
  try {
    await fn(s, events, dir);
  } finally {
    await discardSupervisor(s, dir);
  }
}

const stateOf = (events: ShardEvent[], state: ShardEvent["state"]) => events.find((e) => e.state === state);

/** A free range of `n` ports with a listener of "another program" on its first one. */
async function rangeWithForeignListener(n: number): Promise<{ range: [number, number]; foreign: Server }> {
  for (;;) {
    const from = 30000 + Math.floor(Math.random() * 25000);
    const foreign = createServer();
    const ok = await new Promise<boolean>((r) => {
      foreign.once("error", () => r(false));
      foreign.listen(from, "0.0.0.0", () => r(true));
    });
    if (ok) return { range: [from, from + n], foreign };
  }
}

describe("engine supervisor (real processes)", () => {
  it("answers a repeated start without a second process, and stops on request", async () => {
    await withSupervisor([], async (s, events) => {
      assert.deepEqual(await s.start(spec("s1")), { ok: true });
      await until("running", () => stateOf(events, "running"));
      const pid = s.pids()["s1"];
      assert.deepEqual(await s.start(spec("s1")), { ok: true });
      assert.equal(s.pids()["s1"], pid, "no second process");
      assert.equal(events.filter((e) => e.state === "running").length, 2, "its state said again");
      await s.stop("s1");
      const stopped = await until("stopped", () => stateOf(events, "stopped"));
      assert.equal(stopped.exitCode, 0);
      assert.deepEqual(await s.stop("nope"), { ok: false, error: 'unknown shard "nope"' });
    });
  });

  it("stops a shard asked to stop (or drain) while it is being launched, as soon as its process is up: STOPPED, nothing left", async () => {
    await withSupervisor(["--start-delay-ms", "200"], async (s, events) => {
      // The start is under way (its port being probed) when the stop and the drain arrive.
      const started = s.start(spec("s1"));
      const drained = s.start(spec("s2"));
      assert.deepEqual(await s.stop("s1"), { ok: true });
      assert.deepEqual(await s.drain("s2", Date.now() + 60_000), { ok: true });
      assert.deepEqual(await started, { ok: true });
      assert.deepEqual(await drained, { ok: true });
      for (const id of ["s1", "s2"]) {
        await until(`${id} stopped`, () => events.find((e) => e.shardId === id && e.state === "stopped"));
        assert.deepEqual(
          events.filter((e) => e.shardId === id).map((e) => e.state),
          ["starting", "stopped"],
          `${id}: never RUNNING`,
        );
      }
      assert.deepEqual(s.pids(), {}, "no engine left");
      // Nothing of it is kept for a later start: the next one runs.
      assert.deepEqual(await s.start(spec("s1")), { ok: true });
      await until("s1 running", () => events.find((e) => e.shardId === "s1" && e.state === "running"));
    });
  });

  it("a launch that finishes after close() arms no probe: nothing of the closed supervisor runs on", async () => {
    await withSupervisor([], async (s, events) => {
      const timers = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
      const launched = s.start(spec("late"));
      await s.close();
      const before = timers();
      assert.deepEqual(await launched, { ok: true });
      assert.ok(s.pids().late !== undefined, "the engine was launched");
      // A probe armed now would never be cleared: its interval would keep the agent's process alive.
      assert.equal(timers(), before, "no timer of the closed supervisor is left");
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(stateOf(events, "running"), undefined, "no probe ran after close()");
    });
  });

  it("gives starts arriving together a port each, skipping one another program holds", async () => {
    const { range, foreign } = await rangeWithForeignListener(12);
    try {
      await withSupervisor(
        ["--start-delay-ms", "300"],
        async (s, events) => {
          const ids = ["c1", "c2", "c3", "c4", "c5", "c6"];
          const outcomes = await Promise.all(ids.map((id) => s.start(spec(id))));
          assert.deepEqual(
            outcomes,
            ids.map(() => ({ ok: true })),
          );
          await until("all running", () =>
            ids.every((id) => events.some((e) => e.shardId === id && e.state === "running"))
              ? true
              : undefined,
          );
          const ports = ids.map(
            (id) => new URL(events.find((e) => e.shardId === id && e.state === "running")!.endpoint!).port,
          );
          assert.equal(new Set(ports).size, ids.length, `one port each: ${ports.join(", ")}`);
          assert.ok(!ports.includes(String(range[0])), "the port another program holds is skipped");
          assert.equal(stateOf(events, "failed"), undefined);
        },
        1,
        { portRange: range },
      );
    } finally {
      foreign.close();
    }
  });

  it("starts an engine whose port was taken before it bound once more on another port, not reported a crash", async () => {
    const marker = join(mkdtempSync(join(tmpdir(), "llmgw-sup-port-")), "taken");
    await withSupervisor(["--port-taken-once", marker], async (s, events, dir) => {
      assert.deepEqual(await s.start(spec("s1")), { ok: true });
      const running = await until("running", () => stateOf(events, "running"));
      assert.equal(stateOf(events, "failed"), undefined, "no crash reported");
      const log = readFileSync(join(dir, "logs", "s1.log"), "utf8");
      const taken = /EADDRINUSE: address already in use 0\.0\.0\.0:(\d+)/.exec(log);
      assert.ok(taken, `the first engine died of EADDRINUSE:\n${log}`);
      assert.notEqual(new URL(running.endpoint!).port, taken[1], "the retry runs on another port");
      assert.equal(events.filter((e) => e.state === "starting").length, 2, "STARTING said for each attempt");
    });
  });

  it("starts engines from a clean environment, and keeps the state directory to the agent's user", async () => {
    const baseEnv = {
      PATH: process.env["PATH"],
      HOME: "/home/engine",
      LANG: "C.UTF-8",
      LLMGW_AGENT_TLS_KEY: "/etc/llmgw/agent.key",
      NATS_TOKEN: "secret",
      AWS_SECRET_ACCESS_KEY: "secret",
      FAKE_ENGINE_INHERITED: "from the agent",
    };
    await withSupervisor([], async (s, events, dir) => {
      const record = join(dir, "rec.json");
      await s.close();
      const s2 = new EngineSupervisor({
        engines: enginesSchema.parse({
          default: {
            command: [process.execPath, FAKE_ENGINE, "--port", "{port}", "--record", record],
            env: { FAKE_ENGINE_NODE: "from the agent config" },
            ready: { http: "http://127.0.0.1:{port}/health", intervalMs: 50 },
            portRange: [30000 + Math.floor(Math.random() * 20000), 60000],
          },
        }),
        stateDir: join(dir, "state"),
        advertiseHost: "127.0.0.1",
        onEvent: (e) => events.push(e),
        baseEnv,
      });
      await s2.adopt();
      try {
        await s2.start({ ...spec("s1"), engineEnv: { FAKE_ENGINE_PROFILE: "tp2" } });
        await until("running", () => stateOf(events, "running"));
        const env = JSON.parse(readFileSync(record, "utf8")).env as Record<string, string>;
        for (const k of [
          "LLMGW_AGENT_TLS_KEY",
          "NATS_TOKEN",
          "AWS_SECRET_ACCESS_KEY",
          "FAKE_ENGINE_INHERITED",
        ])
          assert.equal(env[k], undefined, `${k} did not reach the engine`);
        assert.equal(env["PATH"], baseEnv.PATH);
        assert.equal(env["HOME"], "/home/engine");
        assert.equal(env["LANG"], "C.UTF-8");
        assert.equal(env["FAKE_ENGINE_NODE"], "from the agent config");
        assert.equal(env["FAKE_ENGINE_PROFILE"], "tp2");
        // By UUID: the shard's GPUs whatever number the driver gives them next.
        assert.equal(
          env["CUDA_VISIBLE_DEVICES"],
          "GPU-1f6a0c3e-0000-4000-8000-000000000000,GPU-1f6a0c3e-0000-4000-8000-000000000001",
        );
        assert.equal(env["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");
        const mode = (p: string) => statSync(p).mode & 0o777;
        const state = join(dir, "state");
        for (const d of [state, join(state, "shards"), join(state, "logs")]) assert.equal(mode(d), 0o700, d);
        assert.equal(mode(join(state, "shards", "s1.json")), 0o600);
        assert.equal(mode(join(state, "logs", "s1.log")), 0o600);
      } finally {
        await s2.stopAll();
        await s2.close();
      }
    });
  });

  it("refuses shard and replica ids that are not ids before using them in a path", async () => {
    await withSupervisor([], async (s) => {
      const r = await s.start(spec("../../etc/x"));
      assert.equal(r.ok, false);
      assert.match(!r.ok ? r.error : "", /shard id "\.\.\/\.\.\/etc\/x" is not 1 to 200/);
      assert.match(
        ((await s.start(spec(".hidden"))) as { error?: string }).error ?? "",
        /shard id "\.hidden"/,
      );
      const r2 = await s.start({ ...spec("s9"), replicaId: "a/b" });
      assert.match(!r2.ok ? r2.error : "", /replica id "a\/b"/);
      assert.deepEqual(s.pids(), {});
    });
  });

  it("refuses an engine the node does not configure, naming the ones it does", async () => {
    await withSupervisor([], async (s) => {
      const r = await s.start({ ...spec("s1"), engine: "vllm" });
      assert.deepEqual(r, {
        ok: false,
        error: 'engine "vllm" is not configured on this node (configured: default)',
      });
    });
  });

  it("refuses a start its engine policy does not allow: no process, no record, the shard to be reported FAILED", async () => {
    await withSupervisor([], async (s, events, dir) => {
      const r = await s.start({ ...spec("s1"), engineEnv: { LD_PRELOAD: join(dir, "evil.so") } });
      assert.equal(r.ok, false);
      assert.ok(!r.ok && r.shardFailed, "the shard is to be reported FAILED");
      assert.match(
        !r.ok ? r.error : "",
        /^start refused by this node's engine policy \(engine "default"\): engineEnv\.LD_PRELOAD may not be set by the catalog \(deny list LD_\*/,
      );
      assert.deepEqual(s.pids(), {}, "no engine process");
      assert.deepEqual(s.shards(), []);
      assert.deepEqual(events, []);
      assert.deepEqual(readdirSync(join(dir, "shards")), [], "no engine record");
    });
  });

  it("applies the engine's allow lists of environment names and argument prefixes", async () => {
    const dir = mkdtempSync(join(tmpdir(), "llmgw-sup-"));
    const events: ShardEvent[] = [];
    const s = new EngineSupervisor({
      engines: enginesSchema.parse({
        default: {
          command: [process.execPath, FAKE_ENGINE, "--port", "{port}"],
          ready: { http: "http://127.0.0.1:{port}/health", intervalMs: 50 },
          stopGraceSeconds: 1,
          portRange: [30000 + Math.floor(Math.random() * 20000), 60000],
          allowedEnv: ["VLLM_*"],
          allowedArgPrefixes: ["--served-model-name="],
        },
      }),
      stateDir: dir,
      advertiseHost: "127.0.0.1",
      onEvent: (e) => events.push(e),
    });
    await s.adopt();
    try {
      const env = await s.start({ ...spec("s1"), engineEnv: { HF_TOKEN: "t" } });
      assert.match(
        !env.ok ? env.error : "",
        /engineEnv\.HF_TOKEN is not in this engine's allowedEnv \(VLLM_\*\)/,
      );
      const arg = await s.start({ ...spec("s1"), engineArgs: ["--served-model-name", "x"] });
      assert.match(
        !arg.ok ? arg.error : "",
        /engineArgs\[0\] does not start with one of this engine's allowedArgPrefixes/,
      );
      assert.deepEqual(s.pids(), {});
      const ok = await s.start({
        ...spec("s1"),
        engineArgs: ["--served-model-name=x"],
        engineEnv: { VLLM_USE_V1: "1" },
      });
      assert.deepEqual(ok, { ok: true });
      assert.ok(s.pids()["s1"], "started inside the allow lists");
    } finally {
      await discardSupervisor(s, dir);
    }
  });

  it("probes a starting engine on its own cadence by default, four times a second, far more often than a running one's liveness", () => {
    const e = enginesSchema.parse({
      default: { command: ["vllm", "serve", "{model}"], ready: { http: "http://127.0.0.1:{port}/health" } },
    })["default"]!;
    assert.equal(e.ready.intervalMs, READY_INTERVAL_MS);
    assert.equal(READY_INTERVAL_MS, 250);
    assert.ok(e.ready.intervalMs < e.liveness.intervalMs);
  });

  it("refuses an agent config that allows a denied name", () => {
    const r = enginesSchema.safeParse({
      default: { command: ["x"], ready: { http: "http://127.0.0.1:{port}/" }, allowedEnv: ["LD_PRELOAD"] },
    });
    assert.equal(r.success, false);
    assert.match(JSON.stringify(r.error?.issues), /LD_PRELOAD is on the deny list \(LD_\*\)/);
  });

  it("reports a crash as FAILED with the exit code and the last output", async () => {
    await withSupervisor(["--crash-after-ms", "100", "--exit-code", "7"], async (s, events) => {
      await s.start(spec("s1"));
      const failed = await until("failed", () => stateOf(events, "failed"));
      assert.equal(failed.exitCode, 7);
      assert.match(failed.lastOutput ?? "", /illegal memory access was encountered \(exiting 7\)/);
      assert.match(failed.error ?? "", /exited with code 7/);
    });
  });

  it("kills an engine that ignores SIGTERM once the grace has passed", async () => {
    await withSupervisor(
      ["--ignore-sigterm"],
      async (s, events) => {
        await s.start(spec("s1"));
        await until("running", () => stateOf(events, "running"));
        await s.stop("s1");
        const stopped = await until("stopped", () => stateOf(events, "stopped"));
        assert.match(stopped.lastOutput ?? "", /ignoring SIGTERM/, "it was asked first");
      },
      1,
    );
  });

  it("ends a drain by its deadline", async () => {
    await withSupervisor(
      ["--ignore-sigterm"],
      async (s, events) => {
        await s.start(spec("s1"));
        await until("running", () => stateOf(events, "running"));
        await s.drain("s1", Date.now() + 300);
        assert.ok(stateOf(events, "draining"));
        await until("stopped after the drain's deadline", () => stateOf(events, "stopped"));
      },
      0,
    );
  });

  it("ends the drain of an idle engine once the idle grace has passed, long before the deadline", async () => {
    await withSupervisor(
      [],
      async (s, events) => {
        await s.start(spec("s1"));
        await until("running", () => stateOf(events, "running"));
        const drainedAt = Date.now();
        await s.drain("s1", Date.now() + 60_000);
        await until("stopped", () => stateOf(events, "stopped"));
        const took = Date.now() - drainedAt;
        assert.ok(took >= 300, `stopped ${took} ms after the drain, before the 300 ms idle grace`);
        assert.ok(took < 30_000, `stopped ${took} ms after the drain: it waited for the deadline`);
        assert.equal(stateOf(events, "failed"), undefined);
      },
      1,
      { engine: { drain: { idleGraceMs: 300 }, metrics: { intervalMs: 100 } } },
    );
  });

  it("stops a draining engine only after its requests in flight have finished", async () => {
    await withSupervisor(
      ["--request-ms", "1500"],
      async (s, events) => {
        await s.start(spec("s1"));
        const running = await until("running", () => stateOf(events, "running"));
        let answeredAt = 0;
        const request = fetch(`${running.endpoint}/v1/completions`, { method: "POST" }).then(async (r) => {
          answeredAt = Date.now();
          return r.status;
        });
        await new Promise((r) => setTimeout(r, 200));
        await s.drain("s1", Date.now() + 60_000);
        await until("stopped", () => stateOf(events, "stopped"));
        const stoppedAt = Date.now();
        assert.equal(await request, 200, "the request in flight was answered");
        assert.ok(answeredAt > 0 && answeredAt <= stoppedAt, "the engine stopped after answering");
      },
      1,
      { engine: { drain: { idleGraceMs: 0 }, metrics: { intervalMs: 100 } } },
    );
  });

  it("reports an engine that exits by itself during a drain STOPPED, not FAILED", async () => {
    await withSupervisor(["--crash-after-ms", "600", "--waiting", "1"], async (s, events) => {
      await s.start(spec("s1"));
      await until("running", () => stateOf(events, "running"));
      await s.drain("s1", Date.now() + 60_000);
      const stopped = await until("stopped", () => stateOf(events, "stopped"));
      assert.equal(stopped.exitCode, 1);
      assert.equal(stateOf(events, "failed"), undefined);
    });
  });

  it("reads the engine's load from its metrics; an endpoint it cannot read reports no load, counted", async () => {
    await withSupervisor(
      ["--waiting", "7", "--kv-cache-use", "0.25"],
      async (s, events) => {
        await s.start(spec("s1"));
        await until("running", () => stateOf(events, "running"));
        const loads = await until("a load", () => (s.loads().length > 0 ? s.loads() : undefined));
        assert.deepEqual(loads, [{ shardId: "s1", queueDepth: 7, kvCacheUse: 0.25 }]);
      },
      1,
      { engine: { metrics: { intervalMs: 100 } } },
    );
    const failures: string[] = [];
    await withSupervisor(
      [],
      async (s, events) => {
        await s.start(spec("s1"));
        await until("running", () => stateOf(events, "running"));
        await until("two failed readings", () => (failures.length >= 2 ? true : undefined));
        assert.deepEqual(s.loads(), [], "no load, not a zero load");
        assert.deepEqual(s.shards()[0]?.state, "running", "the engine goes on");
      },
      1,
      {
        engine: { metrics: { http: "http://127.0.0.1:{port}/nothing-here", intervalMs: 100 } },
        onLoadFailure: (f) => failures.push(`${f.reason}:${f.first}`),
      },
    );
    assert.deepEqual(failures.slice(0, 2), ["status:true", "status:false"]);
  });

  const LIVENESS = { liveness: { intervalMs: 100, timeoutMs: 80, failureThreshold: 3 } };

  it("reports an engine whose health stops answering FAILED with the reason, and stops it (replace)", async () => {
    await withSupervisor(
      ["--wedge-after-ms", "300"],
      async (s, events) => {
        await s.start(spec("s1"));
        await until("running", () => stateOf(events, "running"));
        const pid = s.pids()["s1"]!;
        const failed = await until("failed", () => stateOf(events, "failed"));
        assert.match(
          failed.error ?? "",
          /^unhealthy: health probe failed 3 times in a row \(last: .*did not answer within 80 ms\)/,
        );
        await until("the engine gone", () => (s.pids()["s1"] === undefined ? true : undefined));
        assert.throws(() => process.kill(pid, 0), "the wedged process was stopped");
        assert.equal(stateOf(events, "stopped"), undefined, "FAILED is its last word");
      },
      1,
      { engine: LIVENESS },
    );
  });

  it("leaves an engine whose health recovers before the threshold alone", async () => {
    await withSupervisor(
      ["--wedge-after-ms", "200", "--recover-after-ms", "150"],
      async (s, events) => {
        await s.start(spec("s1"));
        await until("running", () => stateOf(events, "running"));
        await new Promise((r) => setTimeout(r, 1200));
        assert.deepEqual(
          events.map((e) => e.state),
          ["starting", "running"],
        );
        assert.equal(s.shards()[0]?.state, "running");
      },
      1,
      { engine: LIVENESS },
    );
  });

  it("restarts an unhealthy engine in place on the same GPUs when its policy says so", async () => {
    const marker = join(mkdtempSync(join(tmpdir(), "llmgw-sup-wedge-")), "wedged");
    await withSupervisor(
      ["--wedge-after-ms", "300", "--wedge-once", marker],
      async (s, events) => {
        await s.start(spec("s1"));
        await until("running", () => stateOf(events, "running"));
        const pid = s.pids()["s1"];
        await until("running again", () =>
          events.filter((e) => e.state === "running").length >= 2 ? true : undefined,
        );
        const restarting = events.find((e) => e.state === "starting" && e.error);
        assert.match(
          restarting?.error ?? "",
          /^unhealthy, restarting in place \(1 of 2\): health probe failed 3 times/,
        );
        assert.notEqual(s.pids()["s1"], pid, "a new process");
        assert.deepEqual(s.shards()[0]?.gpuIndices, [0, 1], "on the same GPUs");
        assert.equal(stateOf(events, "failed"), undefined);
      },
      1,
      { engine: { ...LIVENESS, restartPolicy: "restart-in-place", maxRestarts: 2 } },
    );
  });

  it("parses vLLM's, SGLang's and TGI's metrics; garbled text is no load", () => {
    const vllm = {
      queueDepth: ["vllm:num_requests_waiting"],
      kvCacheUse: ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
      running: ["vllm:num_requests_running"],
    };
    const older =
      '# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc{model_name="a"} 0.5\nvllm:num_requests_waiting{model_name="a"} 3\nvllm:num_requests_running{model_name="a"} 2\n';
    assert.deepEqual(loadOfMetricsText(older, vllm), {
      ok: true,
      load: { queueDepth: 3, kvCacheUse: 0.5, running: 2 },
    });
    const sglang =
      'sglang:num_queue_reqs{model_name="m"} 4\nsglang:num_running_reqs{model_name="m"} 1\nsglang:token_usage{model_name="m"} 0.75\n';
    assert.deepEqual(
      loadOfMetricsText(sglang, {
        queueDepth: ["sglang:num_queue_reqs"],
        kvCacheUse: ["sglang:token_usage"],
        running: ["sglang:num_running_reqs"],
      }),
      { ok: true, load: { queueDepth: 4, kvCacheUse: 0.75, running: 1 } },
    );
    const tgi = "# TYPE tgi_queue_size gauge\ntgi_queue_size 2\ntgi_batch_current_size 5\n";
    assert.deepEqual(
      loadOfMetricsText(tgi, {
        queueDepth: ["tgi_queue_size"],
        kvCacheUse: ["tgi_kv_cache_use_none"],
        running: ["tgi_batch_current_size"],
      }),
      { ok: true, load: { queueDepth: 2, kvCacheUse: 0, running: 5 } },
    );
    const garbled = loadOfMetricsText("<html><body>502 Bad Gateway</body></html>", vllm);
    assert.equal(garbled.ok, false);
    assert.equal(!garbled.ok && garbled.reason, "garbled");
    const other = loadOfMetricsText("process_cpu_seconds_total 3\n", vllm);
    assert.equal(!other.ok && other.reason, "missing");
    const nan = loadOfMetricsText("vllm:num_requests_waiting NaN\n", vllm);
    assert.equal(nan.ok, false, "a value that is no number is no load");
  });

  it("adopts a live engine after a restart, and never a recorded PID now held by another process", async () => {
    await withSupervisor([], async (s, events, dir) => {
      await s.start(spec("s1"));
      await until("running", () => stateOf(events, "running"));
      const pid = s.pids()["s1"]!;
      await s.close();
      // Another process under a PID the records name, with the wrong start time.
      const other = spawn("sleep", ["30"], { detached: true, stdio: "ignore" });
      try {
        const fake = JSON.parse(readFileSync(join(dir, "shards", "s1.json"), "utf8"));
        writeFileSync(
          join(dir, "shards", "s2.json"),
          JSON.stringify({ ...fake, spec: spec("s2"), pid: other.pid, startTime: "1" }),
        );
        const again = supervisorOn(dir, () => {});
        const adopted = await again.adopt();
        assert.deepEqual(
          adopted.map((a) => [a.shardId, a.state]),
          [["s1", "running"]],
        );
        assert.equal(again.pids()["s1"], pid, "the same engine process");
        await again.close();
      } finally {
        other.kill("SIGKILL");
      }
    });
  });

  it("records an engine STARTING, then RUNNING after saying so: an agent adopting one recorded STARTING asks the engine, RUNNING if it answers, else probes it until ready", async () => {
    await withSupervisor(["--start-delay-ms", "600"], async (s, events, dir) => {
      await s.start(spec("s1"));
      await until("s1 running", () => events.find((e) => e.shardId === "s1" && e.state === "running"));
      await s.start(spec("s2"));
      assert.ok(events.some((e) => e.shardId === "s2" && e.state === "starting"));
      await s.close();
      const recorded = (id: string) =>
        JSON.parse(readFileSync(join(dir, "shards", `${id}.json`), "utf8")) as {
          state: string;
          startTime: string;
        };
      assert.equal(recorded("s1").state, "running", "written once ready (close waits for the write)");
      assert.equal(recorded("s2").state, "starting");
      assert.notEqual(recorded("s1").startTime, "", "its identity recorded with it");
      // As an agent lost between saying RUNNING and writing it leaves it: the next one asks the engine.
      const path = join(dir, "shards", "s1.json");
      writeFileSync(path, JSON.stringify({ ...JSON.parse(readFileSync(path, "utf8")), state: "starting" }));
      const later: ShardEvent[] = [];
      const again = supervisorOn(dir, (e) => later.push(e));
      try {
        const adopted = await again.adopt();
        assert.deepEqual(
          adopted.map((a) => [a.shardId, a.state]).sort(),
          [
            ["s1", "running"],
            ["s2", "starting"],
          ],
          "s1 answered its ready URL; s2 is still loading",
        );
        await until("s2 running under the new agent", () =>
          later.find((e) => e.shardId === "s2" && e.state === "running"),
        );
        assert.ok(!later.some((e) => e.shardId === "s1"), "nothing more to say of s1");
      } finally {
        await again.close();
      }
    });
  });

  it("says STARTING and RUNNING even when the engine's record cannot be written, and warns that it was not", async () => {
    const dir = mkdtempSync(join(tmpdir(), "llmgw-sup-"));
    const events: ShardEvent[] = [];
    const warnings: string[] = [];
    const s = supervisorOn(dir, (e) => events.push(e), { warn: (_obj, msg) => warnings.push(msg) });
    await s.adopt();
    try {
      // The record's temporary file cannot be created: a directory holds its name.
      mkdirSync(join(dir, "shards", "s1.json.tmp"));
      assert.deepEqual(await s.start(spec("s1")), { ok: true });
      await until("running", () => stateOf(events, "running"));
      assert.deepEqual(
        events.map((e) => e.state),
        ["starting", "running"],
      );
      await until("the warning", () => warnings.find((w) => /record could not be written/.test(w)));
      assert.equal(existsSync(join(dir, "shards", "s1.json")), false);
    } finally {
      await discardSupervisor(s, dir);
    }
  });

  it("reports an adopted engine's crash FAILED with the exit code its wrapper recorded", async () => {
    await withSupervisor(["--crash-after-ms", "1500", "--exit-code", "9"], async (s, events, dir) => {
      await s.start(spec("s1"));
      await until("running", () => stateOf(events, "running"));
      const pid = s.pids()["s1"]!;
      // The agent goes away; the engine lives on and crashes under the next one.
      await s.close();
      const later: ShardEvent[] = [];
      const again = supervisorOn(dir, (e) => later.push(e), { watchMs: 50 });
      try {
        const adopted = await again.adopt();
        assert.deepEqual(
          adopted.map((a) => [a.shardId, a.state]),
          [["s1", "running"]],
          "adopted before its crash",
        );
        assert.equal(again.pids()["s1"], pid);
        const failed = await until("the adopted engine's failure", () => stateOf(later, "failed"));
        assert.equal(failed.exitCode, 9, "the exit code, though the agent was not the engine's parent");
        assert.match(failed.error ?? "", /exited with code 9/);
      } finally {
        await again.close();
      }
    });
  });

  it("refuses a start whose program is not an executable, naming it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "llmgw-sup-"));
    try {
      const s = new EngineSupervisor({
        engines: enginesSchema.parse({
          default: {
            command: ["/nonexistent/vllm", "serve"],
            ready: { http: "http://127.0.0.1:{port}/health" },
          },
        }),
        stateDir: dir,
        advertiseHost: "127.0.0.1",
        onEvent: () => {},
      });
      await s.adopt();
      const r = await s.start(spec("s1"));
      assert.deepEqual(r.ok, false);
      assert.match(r.ok ? "" : r.error, /cannot start \/nonexistent\/vllm: not an executable file/);
      assert.deepEqual(s.pids(), {}, "nothing started");
      await s.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses a start whose engine log cannot be opened, naming the log, and gives its port to the next start", async () => {
    const from = 30000 + Math.floor(Math.random() * 25000);
    await withSupervisor(
      [],
      async (s, events, dir) => {
        // A directory where the shard's log file goes: opening it for appending fails.
        const logPath = join(dir, "logs", "s-bad.log");
        mkdirSync(logPath);
        const r = await s.start(spec("s-bad"));
        assert.equal(r.ok, false);
        assert.match(r.ok ? "" : r.error, /^cannot open the engine log .*s-bad\.log: EISDIR/);
        assert.deepEqual(s.pids(), {}, "nothing started");
        assert.deepEqual(readdirSync(join(dir, "shards")), [], "no record");
        assert.deepEqual(await s.start(spec("s1")), { ok: true });
        const running = await until("running", () => stateOf(events, "running"));
        assert.equal(running.endpoint, `http://127.0.0.1:${from}`, "the refused start's port was released");
      },
      1,
      { portRange: [from, from + 4] },
    );
  });

  it("removes an earlier engine's exit status before starting a shard's engine again", async () => {
    await withSupervisor([], async (s, events, dir) => {
      // Left by an engine of the same shard id that ended while no agent ran.
      const exitPath = join(dir, "shards", "s1.exit");
      writeFileSync(exitPath, "137\n");
      assert.deepEqual(await s.start(spec("s1")), { ok: true });
      await until("running", () => stateOf(events, "running"));
      assert.equal(existsSync(exitPath), false, "the stale exit status is gone");
      assert.equal(stateOf(events, "failed"), undefined);
    });
  });

  it("with ready.ranks first, probes rank 0 only: a rank > 0 that serves no HTTP is RUNNING once started", async () => {
    const dir = mkdtempSync(join(tmpdir(), "llmgw-sup-"));
    const events: ShardEvent[] = [];
    const base = engines(["--start-delay-ms", "60000"]).default!;
    const s = new EngineSupervisor({
      engines: { default: { ...base, ready: { ...base.ready, ranks: "first" } } },
      stateDir: dir,
      advertiseHost: "127.0.0.1",
      onEvent: (e) => events.push(e),
    });
    await s.adopt();
    try {
      assert.equal((await s.start({ ...spec("head"), worldSize: 2 })).ok, true);
      assert.equal((await s.start({ ...spec("worker"), rank: 1, worldSize: 2 })).ok, true);
      const running = await until("the rank-1 shard running", () =>
        events.find((e) => e.shardId === "worker" && e.state === "running"),
      );
      assert.ok(running);
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(
        events.find((e) => e.shardId === "head" && e.state === "running"),
        undefined,
        "rank 0 is still loading: its health does not answer 200 yet",
      );
      assert.deepEqual(
        s
          .shards()
          .map((x) => [x.shardId, x.state])
          .sort(),
        [
          ["head", "starting"],
          ["worker", "running"],
        ],
      );
    } finally {
      await s.stopAll();
      await s.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("names an engine's GPUs by UUID, by index only where a UUID is not known", () => {
    assert.equal(visibleDevices({ gpuIndices: [2, 0], gpuUuids: ["GPU-b", "GPU-a"] }), "GPU-b,GPU-a");
    // A GPU source without UUIDs, or an engine recorded by an older agent (no gpuUuids at all).
    assert.equal(visibleDevices({ gpuIndices: [2, 0], gpuUuids: ["GPU-b", ""] }), "2,0");
    assert.equal(visibleDevices({ gpuIndices: [3] } as never), "3");
  });

  it("reads the start time after the last ')' of /proc/<pid>/stat", () => {
    const fields = Array.from({ length: 50 }, (_, i) => String(i + 3));
    assert.equal(startTimeOfStat(`123 (we(ird) name)) ${fields.join(" ")}`), "22");
  });
});
