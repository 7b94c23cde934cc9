/**
 * `llmgw dev --agents real` as a newcomer stops it: the real command as a
 * child process, one real node agent running the fake engine. A Ctrl-C
 * ends dev within seconds, leaves the engines running (as engines outlive
 * their agents on real machines) and says how many; `llmgw dev
 * --stop-engines` ends them.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { tempDir } from "../harness/nats.js";
import { pidAlive } from "../support/agent-process.js";
import { LLMGW_BIN, runCli } from "../support/cli.js";

const CATALOG = `
models:
  - name: llama-3.1-8b
    replicas: 2
    profiles:
      - name: tp1
        shards: 1
        gpusPerShard: 1
        memoryPerGpu: 24GiB
`;

/** The engine PIDs the agents' records name. */
function recordedEngines(dataDir: string): number[] {
  const shards = join(dataDir, "agents", "gpu-1", "state", "shards");
  return readdirSync(shards)
    .filter((f) => f.endsWith(".json"))
    .map((f) => (JSON.parse(readFileSync(join(shards, f), "utf8")) as { pid: number }).pid);
}

/** The node agent's output, for a failure's story. */
function agentLog(dataDir: string): string {
  try {
    return readFileSync(join(dataDir, "logs", "gpu-1.log"), "utf8").slice(-4000);
  } catch (err) {
    return String(err);
  }
}

describe("llmgw dev --agents real: stopping", () => {
  it("exits within seconds of Ctrl-C saying how many engines keep running; --stop-engines ends them", async () => {
    const dir = tempDir("dev-real");
    const dataDir = join(dir, "data");
    const catalog = join(dir, "catalog.yaml");
    writeFileSync(catalog, CATALOG);
    const proc = spawn(
      process.execPath,
      [
        LLMGW_BIN,
        "dev",
        "--agents",
        "real",
        "--data-dir",
        dataDir,
        "--nodes",
        "1",
        "--gpus-per-node",
        "2",
        ...["--nats-port", "0", "--gateway-port", "0", "--api-port", "0"],
        ...["--catalog", catalog, "--start-delay-ms", "300", "--summary-ms", "500"],
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let text = "";
    proc.stdout?.on("data", (b) => (text += b));
    proc.stderr?.on("data", (b) => (text += b));
    const exited = new Promise<number | null>((r) => proc.once("exit", (code) => r(code)));
    let pids: number[] = [];
    try {
      const deadline = Date.now() + 120_000;
      for (;;) {
        const api = /API and UI\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(text)?.[1];
        if (api) {
          const body = (await (await fetch(`${api}/v1/replicas`)).json()) as {
            replicas: Array<{ phase: string }>;
          };
          if (body.replicas.length === 2 && body.replicas.every((r) => r.phase === "running")) break;
        }
        if (proc.exitCode !== null || Date.now() > deadline)
          throw new Error(
            `llmgw dev --agents real did not run both replicas:\n${text}\nagent:\n${agentLog(dataDir)}`,
          );
        await new Promise((r) => setTimeout(r, 300));
      }
      assert.match(text, /the engines keep running \(as on real machines\) until `llmgw dev --stop-engines`/);
      pids = recordedEngines(dataDir);
      assert.equal(pids.length, 2);

      const stoppingAt = Date.now();
      proc.kill("SIGINT");
      const timer = setTimeout(() => proc.kill("SIGKILL"), 60_000);
      assert.equal(await exited, 0, text);
      clearTimeout(timer);
      const took = Date.now() - stoppingAt;
      // It used to wait for the gateway's 10 s drain deadline and more.
      assert.ok(took < 15_000, `dev took ${took} ms to stop`);
      assert.match(text, /2 engines keep running: engines outlive their node agents by design/);
      assert.ok(pids.every(pidAlive), "the engines outlived dev");

      const r = await runCli(["dev", "--stop-engines", "--data-dir", dataDir]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /stopped 2 engines/);
      assert.ok(!pids.some(pidAlive), "--stop-engines ended them");
      const again = await runCli(["dev", "--stop-engines", "--data-dir", dataDir]);
      assert.match(again.stdout, /no engines were running/);
    } finally {
      proc.kill("SIGKILL");
      for (const pid of pids)
        try {
          process.kill(-pid, "SIGKILL");
        } catch {}
    }
  });
});
