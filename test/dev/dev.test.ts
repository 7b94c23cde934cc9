/**
 * `llmgw dev` as a newcomer runs it: the real command as a child process,
 * checked through its API and its log. A second run on the same data folder
 * must adopt the fleet, not restart it.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { openLog } from "../../src/log/index.js";
import { tempDir } from "../harness/nats.js";
import { LLMGW_BIN } from "../support/cli.js";

const CATALOG = `
models:
  - name: llama-3.1-8b
    replicas: 3
    profiles:
      - name: tp1
        shards: 1
        gpusPerShard: 1
        memoryPerGpu: 24GiB
        gpuProduct: H100
  - name: llama-3.3-70b
    replicas: 2
    profiles:
      - name: tp4
        shards: 1
        gpusPerShard: 4
        memoryPerGpu: 72GiB
        gpuProduct: H100
`;

interface DevRun {
  proc: ChildProcess;
  out: () => string;
  apiUrl: string;
  natsUrl: string;
  exited: Promise<number | null>;
}

async function startDev(dataDir: string, catalog: string): Promise<DevRun> {
  const proc = spawn(
    process.execPath,
    [
      LLMGW_BIN,
      "dev",
      "--data-dir",
      dataDir,
      "--nodes",
      "3",
      "--nats-port",
      "0",
      "--gateway-port",
      "0",
      "--api-port",
      "0",
      "--catalog",
      catalog,
      "--start-delay-ms",
      "300",
      "--summary-ms",
      "500",
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let text = "";
  proc.stdout?.on("data", (b) => (text += b));
  proc.stderr?.on("data", (b) => (text += b));
  const exited = new Promise<number | null>((r) => proc.once("exit", (code) => r(code)));
  const deadline = Date.now() + 120_000;
  for (;;) {
    const api = /API and UI\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(text)?.[1];
    const nats = /NATS\s+(nats:\/\/127\.0\.0\.1:\d+)/.exec(text)?.[1];
    if (api && nats) return { proc, out: () => text, apiUrl: api, natsUrl: nats, exited };
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error(`llmgw dev did not come up:\n${text}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function stopDev(run: DevRun): Promise<number | null> {
  run.proc.kill("SIGINT");
  const timer = setTimeout(() => run.proc.kill("SIGKILL"), 60_000);
  const code = await run.exited;
  clearTimeout(timer);
  return code;
}

interface ReplicaBody {
  replicas: Array<{ replicaId: string; phase: string; shards: Array<{ shardId: string; nodeId: string }> }>;
}

async function waitAllRunning(
  apiUrl: string,
  wanted: number,
  out: () => string,
): Promise<ReplicaBody["replicas"]> {
  const deadline = Date.now() + 120_000;
  let last = "";
  for (;;) {
    try {
      const res = await fetch(`${apiUrl}/v1/replicas`);
      const body = (await res.json()) as ReplicaBody;
      last = JSON.stringify(body.replicas.map((r) => [r.replicaId, r.phase]));
      if (body.replicas.length === wanted && body.replicas.every((r) => r.phase === "running"))
        return body.replicas;
    } catch (err) {
      last = String(err);
    }
    if (Date.now() > deadline) throw new Error(`replicas not all running: ${last}\n${out()}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

/** Waits until the API lists `wanted` nodes; returns the log position it answered at. */
async function waitNodes(apiUrl: string, wanted: number, out: () => string): Promise<number> {
  const deadline = Date.now() + 60_000;
  let last = "";
  for (;;) {
    const body = (await (await fetch(`${apiUrl}/v1/nodes`)).json()) as { seq: number; nodes: unknown[] };
    if (body.nodes.length === wanted) return body.seq;
    last = `${body.nodes.length} nodes at seq ${body.seq}`;
    if (Date.now() > deadline) throw new Error(`expected ${wanted} nodes, have ${last}\n${out()}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

/** StartShard commands in the log's reconcile passes from `fromSeq` on. */
async function startCommands(
  natsUrl: string,
  fromSeq = 1,
): Promise<Array<{ seq: number; replicaId: string; shardId: string }>> {
  const log = await openLog({ url: natsUrl, clientName: "dev-test", ensure: false });
  try {
    const out: Array<{ seq: number; replicaId: string; shardId: string }> = [];
    for await (const r of log.read({ fromSeq, subjects: [log.subjects.reconciler] })) {
      if (r.event.body.case !== "reconcilePass") continue;
      for (const c of r.event.body.value.commands) {
        if (c.action.case === "start")
          out.push({ seq: r.seq, replicaId: c.action.value.replicaId, shardId: c.action.value.shardId });
      }
    }
    return out;
  } finally {
    await log.close();
  }
}

describe("llmgw dev", () => {
  it("brings up the fleet with replicas running, and a second run adopts it without restarting anything", async () => {
    const dataDir = tempDir("dev");
    const catalog = join(dataDir, "catalog.yaml");
    writeFileSync(catalog, CATALOG);

    const first = await startDev(dataDir, catalog);
    let firstReplicas: ReplicaBody["replicas"];
    let lastSeqOfFirst: number;
    try {
      firstReplicas = await waitAllRunning(first.apiUrl, 5, first.out);
      // Two nodes hold all five replicas, so the reconciler may place them before
      // the third machine has registered: wait for it rather than race it.
      lastSeqOfFirst = await waitNodes(first.apiUrl, 3, first.out);
    } finally {
      assert.equal(await stopDev(first), 0, first.out());
    }
    assert.match(first.out(), /stopped/);
    const startsOfFirst = await startCommandsAfterRestart(dataDir, catalog, firstReplicas, lastSeqOfFirst);
    assert.equal(startsOfFirst, 0);
  });
});

/** Runs dev again on the same data and returns how many shards it started anew. */
async function startCommandsAfterRestart(
  dataDir: string,
  catalog: string,
  before: ReplicaBody["replicas"],
  lastSeqOfFirst: number,
): Promise<number> {
  const second = await startDev(dataDir, catalog);
  try {
    assert.match(second.out(), /catalog from the log/);
    assert.match(second.out(), /5 shards still running from the last run/);
    const after = await waitAllRunning(second.apiUrl, 5, second.out);
    // The same replicas on the same shards: adopted, not re-placed.
    const key = (rs: ReplicaBody["replicas"]) =>
      rs.map((r) => `${r.replicaId}:${r.shards.map((s) => `${s.shardId}@${s.nodeId}`).join(",")}`).sort();
    assert.deepEqual(key(after), key(before));
    const starts = await startCommands(second.natsUrl, lastSeqOfFirst + 1);
    return starts.length;
  } finally {
    assert.equal(await stopDev(second), 0, second.out());
  }
}
