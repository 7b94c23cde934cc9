// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the assertions
/**
 * Engine logs on a real node, with every real part of the control plane
 * (nats-server, a gateway, a `llmgw reconciler` process, the operator API)
 * and a real `llmgw agent` process on a fake nvidia-smi and the fake engine,
 * here a chatty one:
 *
 * - `llmgw logs <replica>` prints the engine's last lines, and `llmgw logs
 *   <shard> --follow` keeps printing what it prints next; the CLI leaving
 *   cancels the request at the gateway (and so at the agent);
 * - rotation keeps the shard's log files under their cap while the engine
 *   writes many times that;
 * - an unknown replica is named; a node whose agent is gone says so, and a
 *   lost node says it is gone; none of the output is in the log.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type NatsServer, startServer } from "../harness/nats.js";
import { until } from "../support/agent-process.js";
import { nodeView, runningShards, startNode, tp1Catalog, withAgentWorld } from "../support/agent-world.js";
import { LLMGW_BIN, runCli } from "../support/cli.js";
import { readAll } from "../support/gateway.js";

const NODE = "gpu-logs1";
const MAX_FILE = 16 * 1024;
const KEEP = 2;
/** The chatty engine: a 200-byte line every 5 ms (40 KB/s). */
const LINE_BYTES = 200;
const CHATTER_MS = 5;
const CHECK_MS = 100;

/** Lines of the fake engine's chatter in `text`, by their step numbers. */
const steps = (text: string) => [...text.matchAll(/fake-engine: step (\d+) /g)].map((m) => Number(m[1]));

describe("llmgw logs and engine log rotation (real processes)", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("prints an engine's output and follows it; rotation keeps the directory under its cap under a chatty engine", async () => {
    await withAgentWorld(
      server,
      { name: "aglogs", reconciler: { suspectAfterMs: 1000, lostAfterMs: 10_000 } },
      async (w) => {
        const agent = await startNode(w, NODE, {
          gpus: [{}],
          config: {
            startDelayMs: 200,
            engineLogs: { maxFileBytes: MAX_FILE, keepFiles: KEEP, checkIntervalMs: CHECK_MS },
            engineFlags: ["--chatter-ms", String(CHATTER_MS), "--chatter-bytes", String(LINE_BYTES)],
          },
        });
        await w.stack.call("PUT", "/v1/catalog", tp1Catalog(1));
        const running = await until("the shard RUNNING", async () => (await runningShards(w, NODE))[0], {
          timeoutMs: 30_000,
          why: w.why,
        });
        const { shardId, replicaId } = running.status;
        const api = ["--api", w.stack.api.url];

        // The last lines, through the API, the gateway and the agent's stream.
        const tail = await runCli(["logs", replicaId, "--tail", "5", ...api]);
        assert.equal(tail.code, 0, tail.stderr);
        const lines = tail.stdout.split("\n").filter((l) => l !== "");
        assert.equal(lines.length, 5, tail.stdout);
        assert.equal(steps(tail.stdout).length, 5, "the engine's own lines");

        // Followed: what the engine prints after the CLI started keeps coming.
        const follow = spawn(
          process.execPath,
          [LLMGW_BIN, "logs", shardId, "--follow", "--tail", "1", ...api],
          {
            stdio: ["ignore", "pipe", "pipe"],
          },
        );
        let out = "";
        let err = "";
        follow.stdout.on("data", (b) => (out += b));
        follow.stderr.on("data", (b) => (err += b));
        const exited = new Promise<number | null>((r) => follow.once("exit", (code) => r(code)));
        try {
          const first = await until("the first followed line", async () => steps(out)[0], {
            timeoutMs: 20_000,
            why: async () => `stdout: ${out.slice(-500)}\nstderr: ${err}`,
          });
          await until(
            "lines printed well after the first one",
            async () => (steps(out).some((n) => n > first + 200) ? true : undefined),
            { timeoutMs: 20_000, why: async () => `stdout: ${out.slice(-500)}\nstderr: ${err}` },
          );
          const seen = steps(out);
          // In order, none twice (rotations under way may skip some, never repeat them).
          for (let i = 1; i < seen.length; i++)
            assert.ok(seen[i]! > seen[i - 1]!, `step ${seen[i]} after ${seen[i - 1]}`);
          assert.equal(w.stack.gw.engineLogRequests, 1, "one request under way at the gateway");
        } finally {
          follow.kill("SIGINT");
        }
        assert.equal(await exited, 0, err);
        await until(
          "the gateway forgot the request once its client left",
          async () => (w.stack.gw.engineLogRequests === 0 ? true : undefined),
          { timeoutMs: 10_000, why: w.why },
        );

        // Rotation: the shard's files stay within (keep + 1) × max, plus what the engine writes in one check.
        const logsDir = join(w.dir, "state", "logs");
        const cap = (KEEP + 1) * MAX_FILE + 2 * ((LINE_BYTES * CHECK_MS) / CHATTER_MS);
        let largest = 0;
        for (let i = 0; i < 30; i++) {
          // A file rotation removes between the listing and its stat counts as empty.
          const size = (f: string) => statSync(join(logsDir, f), { throwIfNoEntry: false })?.size ?? 0;
          const total = readdirSync(logsDir).reduce((n, f) => n + size(f), 0);
          largest = Math.max(largest, total);
          await new Promise((r) => setTimeout(r, 100));
        }
        assert.ok(largest <= cap, `the logs directory held ${largest} bytes; its cap is ${cap}`);
        const written =
          Math.max(...steps((await runCli(["logs", shardId, "--tail", "1", ...api])).stdout)) * LINE_BYTES;
        assert.ok(written > 4 * cap, `the engine wrote ${written} bytes, several times the cap`);
        assert.deepEqual(
          readdirSync(logsDir).sort(),
          [`${shardId}.log`, `${shardId}.log.1`, `${shardId}.log.2`],
          "the current file and the kept ones only",
        );
        assert.ok(statSync(join(logsDir, `${shardId}.log.1`)).size <= MAX_FILE);

        // None of the output went into the log.
        const records = await readAll(w.stack.log);
        assert.ok(
          !records.some((r) =>
            JSON.stringify(r.event.body.value ?? {}, (_k, v) =>
              typeof v === "bigint" ? String(v) : v,
            ).includes("fake-engine: step"),
          ),
          "no event holds the chatter",
        );

        // Errors name what is wrong.
        const unknown = await runCli(["logs", "no-such-replica", ...api]);
        assert.equal(unknown.code, 2, unknown.stderr);
        assert.match(unknown.stderr, /no replica or shard named no-such-replica/);

        agent.proc.kill("SIGKILL");
        await until(
          "the node without a session",
          async () => ((await nodeView(w.stack, NODE))?.session === null ? true : undefined),
          { timeoutMs: 20_000, why: w.why },
        );
        // Not yet lost: its agent is not connected, and the CLI says so.
        const away = await runCli(["logs", replicaId, ...api]);
        assert.equal(away.code, 1, away.stderr);
        assert.match(away.stderr, /the agent of node gpu-logs1 .*is not connected/);
        const gone = await until(
          "llmgw logs saying the node is gone once it is lost",
          async () => {
            const r = await runCli(["logs", replicaId, ...api]);
            return /node gpu-logs1 .*is gone: lost/.test(r.stderr) ? r : undefined;
          },
          { timeoutMs: 30_000, why: w.why },
        );
        assert.equal(gone.code, 1);
        assert.ok(existsSync(join(logsDir, `${shardId}.log`)));
      },
    );
  });
});
