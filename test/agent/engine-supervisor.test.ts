/**
 * The engine supervisor with real processes (the fake engine): idempotent
 * starts, a crash reported FAILED with its exit code and last output, a
 * SIGTERM-ignoring engine killed after the grace, a drain ended by its
 * deadline, and adoption that never takes a reused PID.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { EngineSupervisor, enginesSchema, type ShardEvent, startTimeOfStat } from "../../src/agent/index.js";

const FAKE_ENGINE = join(import.meta.dirname, "../../examples/agent/fake-engine.mjs");

function engines(extra: string[], stopGraceSeconds = 1) {
  return enginesSchema.parse({
    default: {
      command: [process.execPath, FAKE_ENGINE, "--port", "{port}", ...extra],
      ready: { http: "http://127.0.0.1:{port}/health", intervalMs: 50 },
      stopGraceSeconds,
      portRange: [30000 + Math.floor(Math.random() * 20000), 60000],
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

async function withSupervisor(
  extra: string[],
  fn: (s: EngineSupervisor, events: ShardEvent[], dir: string) => Promise<void>,
  grace = 1,
): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "llmgw-sup-"));
  const events: ShardEvent[] = [];
  const s = new EngineSupervisor({
    engines: engines(extra, grace),
    stateDir: dir,
    advertiseHost: "127.0.0.1",
    onEvent: (e) => events.push(e),
    watchMs: 50,
  });
  await s.adopt();
  try {
    await fn(s, events, dir);
  } finally {
    for (const pid of Object.values(s.pids())) {
      try {
        process.kill(-pid, "SIGKILL");
      } catch {}
    }
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const stateOf = (events: ShardEvent[], state: ShardEvent["state"]) => events.find((e) => e.state === state);

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
      for (const pid of Object.values(s.pids())) {
        try {
          process.kill(-pid, "SIGKILL");
        } catch {}
      }
      await s.close();
      rmSync(dir, { recursive: true, force: true });
    }
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
        const again = new EngineSupervisor({
          engines: engines([]),
          stateDir: dir,
          advertiseHost: "127.0.0.1",
          onEvent: () => {},
        });
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

  it("reports an adopted engine's crash FAILED with the exit code its wrapper recorded", async () => {
    await withSupervisor(["--crash-after-ms", "1500", "--exit-code", "9"], async (s, events, dir) => {
      await s.start(spec("s1"));
      await until("running", () => stateOf(events, "running"));
      const pid = s.pids()["s1"]!;
      // The agent goes away; the engine lives on and crashes under the next one.
      await s.close();
      const later: ShardEvent[] = [];
      const again = new EngineSupervisor({
        engines: engines([]),
        stateDir: dir,
        advertiseHost: "127.0.0.1",
        onEvent: (e) => later.push(e),
        watchMs: 50,
      });
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

  it("reads the start time after the last ')' of /proc/<pid>/stat", () => {
    const fields = Array.from({ length: 50 }, (_, i) => String(i + 3));
    assert.equal(startTimeOfStat(`123 (we(ird) name)) ${fields.join(" ")}`), "22");
  });
});
