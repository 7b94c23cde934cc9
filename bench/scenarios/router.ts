/**
 * Router: the data plane's cost and speed, in the same run as its raw references:
 *   - overhead: a closed loop of C clients sending the same small chat
 *     completion straight to a bare node:http engine (the raw reference),
 *     then through a `llmgw router` process to that engine: requests/s, p50
 *     and p99 latency of each, their ratio, and the p50 the router adds;
 *   - table change → applied: a routing-table write to the endpoints bucket
 *     until the router's table follower (the same code, in this process)
 *     has applied it, p50 and p99;
 *   - memory per 1,000 concurrent streaming requests: the router process's
 *     RSS while 1,000 server-sent-event streams pass through it, minus its
 *     RSS idle.
 * The router runs with LLMGW_LOG_LEVEL=warn (no access log), like every
 * process the benchmarks start.
 */
import { Agent, request } from "node:http";
import { createServer } from "node:net";
import { jetstream } from "@nats-io/jetstream";
import { pino } from "pino";
import { connectNats } from "../../src/log/index.js";
import { EndpointsBucket } from "../../src/reconciler/runner/index.js";
import { RoutingTable, TableFollower } from "../../src/router/index.js";
import { startServer } from "../../test/harness/nats.js";
import { type Child, sleep, spawnLlmgw, spawnScript } from "../../test/harness/proc.js";
import { sampleProc } from "../support/proc-sample.js";
import { figure, type Scenario } from "../support/result.js";

const ENGINE = new URL("../support/bare-engine.ts", import.meta.url).pathname;
const BODY = JSON.stringify({ model: "bench", messages: [{ role: "user", content: "Say hello." }] });

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const a = s.address();
      s.close(() => resolve(typeof a === "object" && a ? a.port : 0));
    });
  });
}

function post(agent: Agent, port: number, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        method: "POST",
        path: "/v1/chat/completions",
        agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      },
      (res) => {
        res.on("data", () => {});
        res.on("end", () => resolve(res.statusCode ?? 0));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** C clients in a closed loop for `ms`: requests/s and latency percentiles (ms). */
async function closedLoop(port: number, clients: number, ms: number) {
  const agent = new Agent({ keepAlive: true, maxSockets: clients });
  const lat: number[] = [];
  let failed = 0;
  const end = performance.now() + ms;
  const client = async () => {
    while (performance.now() < end) {
      const t = performance.now();
      const status = await post(agent, port, BODY).catch(() => 0);
      if (status !== 200) failed++;
      lat.push(performance.now() - t);
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: clients }, client));
  const took = performance.now() - t0;
  agent.destroy();
  lat.sort((a, b) => a - b);
  const q = (p: number) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] ?? 0;
  return { rps: (lat.length / took) * 1000, p50: q(0.5), p99: q(0.99), failed, n: lat.length };
}

async function waitHealthy(url: string, child: Child): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      const r = await fetch(`${url}/healthz`);
      if (r.status === 200 && ((await r.json()) as { status: string }).status === "ok") return;
    } catch {}
    if (Date.now() > deadline) throw new Error(`the router did not come up:\n${child.output()}`);
    await sleep(100);
  }
}

export const router: Scenario = {
  name: "router",
  describe:
    "router throughput and latency vs straight to the engine; table change → applied; memory per 1,000 streams",
  async run(ctx) {
    const clients = 32;
    const loopMs = ctx.quick ? 600 : 5_000;
    const changes = ctx.quick ? 20 : 300;
    const streams = 1_000;
    const server = await startServer();
    const children: Child[] = [];
    const nc = await connectNats({ url: server.url, name: "bench router" });
    try {
      const engine = spawnScript(ENGINE, ["0"], { STREAM_CHUNKS: "30", STREAM_GAP_MS: "100" });
      children.push(engine);
      const enginePort = Number((await engine.waitForLine(/^listening \d+/)).split(" ")[1]);
      const bucket = await EndpointsBucket.open(jetstream(nc), { bucket: "llmgw_endpoints" });
      await bucket.sync({
        bench: [{ replicaId: "bench-1", url: `http://127.0.0.1:${enginePort}`, nodeId: "n1" }],
      });
      const routerPort = await freePort();
      const routerUrl = `http://127.0.0.1:${routerPort}`;
      const r = spawnLlmgw([
        ...["router", "--nats", server.url, "--listen", `127.0.0.1:${routerPort}`, "--no-load-feed"],
        ...["--max-concurrent-per-client", String(streams * 2)],
      ]);
      children.push(r);
      await waitHealthy(routerUrl, r);

      ctx.progress("overhead: warm-up");
      await closedLoop(enginePort, clients, 300);
      await closedLoop(routerPort, clients, 300);
      ctx.progress("overhead: straight to the engine");
      const e0 = sampleProc(engine.pid);
      const direct = await closedLoop(enginePort, clients, loopMs);
      const e1 = sampleProc(engine.pid);
      ctx.progress("overhead: through the router");
      const r0 = sampleProc(r.pid);
      const routed = await closedLoop(routerPort, clients, loopMs);
      const r1 = sampleProc(r.pid);
      // CPU per request: what the machine's load does not change much.
      const engineCpuUs = ((e1.cpuS - e0.cpuS) / direct.n) * 1e6;
      const routerCpuUs = ((r1.cpuS - r0.cpuS) / routed.n) * 1e6;
      ctx.progress("overhead: one client at a time");
      const directOne = await closedLoop(enginePort, 1, loopMs / 3);
      const routedOne = await closedLoop(routerPort, 1, loopMs / 3);
      if (routed.failed > 0 || direct.failed > 0)
        throw new Error(`failed requests: ${routed.failed} through the router, ${direct.failed} direct`);

      ctx.progress("table change → applied");
      const table = new RoutingTable();
      let waiter: { want: string; resolve: () => void } | undefined;
      table.onChange((c) => {
        if (waiter && c.after[0]?.replicaId === waiter.want) waiter.resolve();
      });
      const follower = new TableFollower(nc, table, {
        bucket: "llmgw_endpoints",
        logger: pino({ level: "silent" }),
      });
      await follower.start();
      const applied: number[] = [];
      for (let i = 0; i < changes; i++) {
        const want = `bench-${i + 2}`;
        const seen = new Promise<void>((resolve) => {
          waiter = { want, resolve };
        });
        const t = performance.now();
        await bucket.kv.put(
          "bench",
          JSON.stringify([{ replicaId: want, url: `http://127.0.0.1:${enginePort}`, nodeId: "n1" }]),
        );
        await seen;
        applied.push(performance.now() - t);
      }
      follower.stop();
      applied.sort((a, b) => a - b);
      const ap = (p: number) => applied[Math.min(applied.length - 1, Math.floor(p * applied.length))] ?? 0;

      ctx.progress("memory: 1,000 concurrent streams");
      await sleep(500);
      const idle = sampleProc(r.pid).rssBytes;
      const agent = new Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
      let open = 0;
      let peak = 0;
      const streaming = Array.from(
        { length: streams },
        () =>
          new Promise<number>((resolve) => {
            const req = request(
              { host: "127.0.0.1", port: routerPort, method: "POST", path: "/v1/chat/completions", agent },
              (res) => {
                open++;
                let events = 0;
                res.on("data", (c: Buffer) => {
                  events += c.toString().split("data: ").length - 1;
                });
                res.on("end", () => resolve(events));
              },
            );
            req.on("error", () => resolve(0));
            req.end(JSON.stringify({ model: "bench", stream: true, messages: [] }));
          }),
      );
      // Sample while every stream is open (they last 3 s).
      while (open < streams) await sleep(50);
      await sleep(500);
      for (let i = 0; i < 5; i++) {
        peak = Math.max(peak, sampleProc(r.pid).rssBytes);
        await sleep(200);
      }
      const events = await Promise.all(streaming);
      agent.destroy();
      const complete = events.filter((e) => e === 31).length;
      const perThousand = ((peak - idle) / streams) * 1000;

      const addedP50 = routedOne.p50 - directOne.p50;
      return {
        params: { clients, loopMs, changes, streams, engine: "bare node:http, same body" },
        figures: [
          figure(`requests/s through the router, ${clients} clients`, routed.rps, "req/s", {
            raw: { name: "straight to the engine", value: direct.rps },
            goal: "ratio ≥ 0.8",
            met: routed.rps / direct.rps >= 0.8,
          }),
          figure(`p50 latency through the router, ${clients} clients`, routed.p50, "ms", {
            raw: { name: "straight to the engine", value: direct.p50 },
            higherIsBetter: false,
          }),
          figure(`p99 latency through the router, ${clients} clients`, routed.p99, "ms", {
            raw: { name: "straight to the engine", value: direct.p99 },
            higherIsBetter: false,
          }),
          figure("router CPU per request", routerCpuUs, "µs", {
            raw: { name: "the bare engine's", value: engineCpuUs },
            higherIsBetter: false,
          }),
          figure("p50 latency added by the router, one client", addedP50, "ms", {
            goal: "< 1 ms",
            met: addedP50 < 1,
          }),
          figure("table change → applied p50", ap(0.5), "ms"),
          figure("table change → applied p99", ap(0.99), "ms", { goal: "< 50 ms", met: ap(0.99) < 50 }),
          figure("router RSS per 1,000 concurrent streams", perThousand / (1024 * 1024), "MiB"),
        ],
        notes: [
          `${clients} clients in a closed loop, ${loopMs} ms each side: ${direct.n} requests direct, ${routed.n} through the router; at ${clients} clients every process is CPU-bound (client, router and engine share the machine's cores), so the ratio is the router's CPU cost per request against a bare server's`,
          `one client at a time: p50 ${directOne.p50.toFixed(2)} ms direct, ${routedOne.p50.toFixed(2)} ms through the router`,
          `${complete} of ${streams} streams arrived whole (30 chunks and [DONE]); router RSS ${(idle / 2 ** 20).toFixed(0)} MiB idle, ${(peak / 2 ** 20).toFixed(0)} MiB with them open`,
          "table change → applied: a put to the bucket until the router's table follower (run in the bench process) applied it",
        ],
      };
    } finally {
      for (const c of children) await c.stop();
      await nc.close();
      await server.close();
    }
  },
};
