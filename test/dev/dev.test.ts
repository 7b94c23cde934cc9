/**
 * `llmgw dev` as a newcomer runs it: the real command as a child process,
 * checked through its API and its log. A second run on the same data folder
 * must adopt the fleet, not restart it: the test waits for the adoption
 * decisions of the new sessions before it looks for starts and stops.
 */
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { devCredsDir } from "../../src/cli/dev/paths.js";
import { natsAuthFiles } from "../../src/cli/nats-auth-files.js";
import { isLogError, openLog } from "../../src/log/index.js";
import { authenticatorFromCredentials } from "../../src/nats-auth/index.js";
import { startServer, tempDir } from "../harness/nats.js";
import { type CliProcess, runCli, startCli } from "../support/cli.js";

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

/** A running `llmgw dev` and the addresses it printed. */
interface DevRun extends CliProcess {
  apiUrl: string;
  /** The router dev started (the OpenAI API). */
  routerUrl: string;
  natsUrl: string;
  /** The reader's credentials dev printed (NATS runs with authentication). */
  readerCreds: string;
}

async function startDev(dataDir: string, catalog: string): Promise<DevRun> {
  const dev = startCli([
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
    "--router-port",
    "0",
    "--catalog",
    catalog,
    "--start-delay-ms",
    "300",
    "--summary-ms",
    "500",
  ]);
  const { proc } = dev;
  const deadline = Date.now() + 120_000;
  for (;;) {
    const text = dev.output();
    const api = /API and UI\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(text)?.[1];
    const nats = /NATS\s+(nats:\/\/127\.0\.0\.1:\d+) \(authentication on\)/.exec(text)?.[1];
    const readerCreds = /NATS reader (\S+reader\.nk)/.exec(text)?.[1];
    const router = /router\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(text)?.[1];
    if (api && nats && readerCreds && router)
      return { ...dev, apiUrl: api, routerUrl: router, natsUrl: nats, readerCreds };
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

/** Waits until the API lists `wanted` nodes. */
async function waitNodes(apiUrl: string, wanted: number, out: () => string): Promise<void> {
  const deadline = Date.now() + 60_000;
  let last = "";
  for (;;) {
    const body = (await (await fetch(`${apiUrl}/v1/nodes`)).json()) as { seq: number; nodes: unknown[] };
    if (body.nodes.length === wanted) return;
    last = `${body.nodes.length} nodes at seq ${body.seq}`;
    if (Date.now() > deadline) throw new Error(`expected ${wanted} nodes, have ${last}\n${out()}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

interface SecondRunLog {
  /** The newest session of each node opened from `fromSeq` on. */
  sessions: Map<string, string>;
  /** `shardsAdopted` decisions of those sessions: node → adopted shard ids. */
  adopted: Map<string, string[]>;
  /** StartShard and StopShard commands from `fromSeq` on. */
  starts: Array<{ seq: number; replicaId: string; shardId: string }>;
  stops: Array<{ seq: number; shardId: string }>;
}

/** What the log holds from `fromSeq` on: the new sessions, their adoption, starts and stops. */
async function readSecondRun(run: DevRun, fromSeq: number): Promise<SecondRunLog> {
  const log = await openLog({
    url: run.natsUrl,
    clientName: "dev-test",
    ensure: false,
    security: { authenticator: authenticatorFromCredentials(readFileSync(run.readerCreds, "utf8")) },
    // The reader's credentials grant no consumer: it reads with direct gets.
    readVia: "direct",
  });
  try {
    const sessions = new Map<string, string>();
    const adoptions: Array<{ nodeId: string; sessionId: string; shardIds: string[] }> = [];
    const starts: SecondRunLog["starts"] = [];
    const stops: SecondRunLog["stops"] = [];
    for await (const r of log.read({ fromSeq })) {
      const b = r.event.body;
      if (b.case === "sessionOpened") sessions.set(b.value.nodeId, b.value.sessionId);
      if (b.case !== "reconcilePass") continue;
      for (const d of b.value.decisions) {
        if (d.kind.case === "shardsAdopted")
          adoptions.push({
            nodeId: d.kind.value.nodeId,
            sessionId: d.kind.value.sessionId,
            shardIds: d.kind.value.shards.map((x) => x.shardId),
          });
      }
      for (const c of b.value.commands) {
        if (c.action.case === "start")
          starts.push({ seq: r.seq, replicaId: c.action.value.replicaId, shardId: c.action.value.shardId });
        if (c.action.case === "stop") stops.push({ seq: r.seq, shardId: c.action.value.shardId });
      }
    }
    const adopted = new Map<string, string[]>();
    for (const a of adoptions) if (sessions.get(a.nodeId) === a.sessionId) adopted.set(a.nodeId, a.shardIds);
    return { sessions, adopted, starts, stops };
  } finally {
    await log.close();
  }
}

/**
 * The last sequence of the log a stopped dev run left in `dataDir`: its
 * store opened by a nats-server of the test's own, with dev's
 * authentication, read with the reader's credentials, and closed again.
 */
async function lastSeqInStore(dataDir: string, readerCreds: string): Promise<number> {
  const server = await startServer({
    name: "llmgw-dev",
    storeDir: join(dataDir, "nats"),
    include: natsAuthFiles(devCredsDir(dataDir)).serverConfig,
  });
  try {
    const log = await openLog({
      url: server.url,
      clientName: "dev-test",
      ensure: false,
      security: { authenticator: authenticatorFromCredentials(readFileSync(readerCreds, "utf8")) },
    });
    try {
      return await log.lastSeq();
    } finally {
      await log.close();
    }
  } finally {
    // Stopped cleanly: the second run opens the same store.
    await server.stop();
    await server.close();
  }
}

/** NATS refuses anonymous clients; the reader's credentials dev printed read the log with `llmgw events`. */
async function assertNatsAuthOn(run: DevRun): Promise<void> {
  await assert.rejects(
    openLog({ url: run.natsUrl, clientName: "dev-test anonymous", ensure: false }),
    (err) => isLogError(err, "unauthenticated"),
  );
  const events = await runCli(["events", "--nats", run.natsUrl, "--until-seq", "5"], {
    env: { LLMGW_NATS_CREDS: run.readerCreds },
  });
  assert.equal(events.code, 0, events.stderr);
  assert.ok(events.stdout.trim().length > 0, "llmgw events printed nothing");
}

/**
 * The router dev started follows the table with its own credentials: it
 * lists the catalog's models, routes a completion, and the API (given the
 * router by dev) counts it per replica for the UI.
 */
async function assertRouterServes(run: DevRun): Promise<void> {
  const deadline = Date.now() + 30_000;
  let last = "";
  for (;;) {
    const health = (await (await fetch(`${run.routerUrl}/healthz`)).json()) as { status: string };
    const models = (await (await fetch(`${run.routerUrl}/v1/models`)).json()) as {
      data: Array<{ id: string }>;
    };
    last = `${health.status} ${JSON.stringify(models.data.map((m) => m.id))}`;
    if (health.status === "ok" && models.data.map((m) => m.id).join(",") === "llama-3.1-8b,llama-3.3-70b")
      break;
    if (Date.now() > deadline)
      throw new Error(`the router does not serve the fleet's models: ${last}\n${run.output()}`);
    await new Promise((r) => setTimeout(r, 300));
  }
  for (let i = 0; i < 5; i++) {
    const res = await fetch(`${run.routerUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "llama-3.1-8b", messages: [{ role: "user", content: "Hello" }] }),
    });
    const text = await res.text();
    assert.equal(res.status, 200, `a completion through the router: ${text}`);
  }
  const counted = (await (await fetch(`${run.apiUrl}/v1/router/requests`)).json()) as {
    routers: Array<{ url: string; error?: string }>;
    replicas: Array<{ model: string; requests: number }>;
  };
  assert.deepEqual(
    counted.routers.map((r) => [r.url, r.error]),
    [[run.routerUrl, undefined]],
  );
  const total = counted.replicas
    .filter((r) => r.model === "llama-3.1-8b")
    .reduce((a, r) => a + r.requests, 0);
  assert.equal(total, 5, JSON.stringify(counted));
}

describe("llmgw dev", () => {
  it("brings up the fleet with replicas running, and a second run adopts it without restarting anything", async () => {
    const dataDir = tempDir("dev");
    const catalog = join(dataDir, "catalog.yaml");
    writeFileSync(catalog, CATALOG);

    const first = await startDev(dataDir, catalog);
    let firstReplicas: ReplicaBody["replicas"];
    try {
      firstReplicas = await waitAllRunning(first.apiUrl, 5, first.output);
      // Two nodes hold all five replicas, so the reconciler may place them before
      // the third machine has registered: wait for it rather than race it.
      await waitNodes(first.apiUrl, 3, first.output);
      await assertNatsAuthOn(first);
      await assertRouterServes(first);
    } finally {
      assert.equal(await stopDev(first), 0, first.output());
    }
    assert.match(first.output(), /stopped/);
    // The second run's window starts after everything the first run wrote, its shutdown included.
    const lastSeqOfFirst = await lastSeqInStore(dataDir, first.readerCreds);
    await assertAdoptedAfterRestart(dataDir, catalog, firstReplicas, lastSeqOfFirst);
  });
});

/**
 * Runs dev again on the same data: waits until the reconciler has adopted
 * every node's new session (a replica's phase does not change when its
 * session closes, so "all running" alone proves nothing), then checks that
 * the adopted shards are the first run's and that none was started or stopped.
 */
async function assertAdoptedAfterRestart(
  dataDir: string,
  catalog: string,
  before: ReplicaBody["replicas"],
  lastSeqOfFirst: number,
): Promise<void> {
  const second = await startDev(dataDir, catalog);
  try {
    assert.match(second.output(), /catalog from the log/);
    assert.match(second.output(), /5 shards still running from the last run/);
    const deadline = Date.now() + 120_000;
    let seen = await readSecondRun(second, lastSeqOfFirst + 1);
    while (seen.sessions.size < 3 || seen.adopted.size < seen.sessions.size) {
      if (Date.now() > deadline)
        throw new Error(
          `the second run's sessions were not all adopted: ${seen.sessions.size} new sessions, adoption decisions for ${[...seen.adopted.keys()].join(", ") || "none"}\n${second.output()}`,
        );
      await new Promise((r) => setTimeout(r, 300));
      seen = await readSecondRun(second, lastSeqOfFirst + 1);
    }
    const shardsOf = (rs: ReplicaBody["replicas"]) =>
      rs.flatMap((r) => r.shards.map((x) => x.shardId)).sort();
    assert.deepEqual(
      [...seen.adopted.values()].flat().sort(),
      shardsOf(before),
      "the new sessions adopted exactly the shards the first run left running",
    );
    const after = await waitAllRunning(second.apiUrl, 5, second.output);
    // The same replicas on the same shards: adopted, not re-placed.
    const key = (rs: ReplicaBody["replicas"]) =>
      rs.map((r) => `${r.replicaId}:${r.shards.map((x) => `${x.shardId}@${x.nodeId}`).join(",")}`).sort();
    assert.deepEqual(key(after), key(before));
    // Read again after the adoption and the running check: any start or stop is now in the log.
    const final = await readSecondRun(second, lastSeqOfFirst + 1);
    assert.deepEqual(final.starts, [], "no shard was started after the restart");
    const adopted = new Set(shardsOf(before));
    assert.deepEqual(
      final.stops.filter((x) => adopted.has(x.shardId)),
      [],
      "no adopted shard was stopped after the restart",
    );
  } finally {
    assert.equal(await stopDev(second), 0, second.output());
  }
}
