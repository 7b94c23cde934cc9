// biome-ignore-all lint/suspicious/noExplicitAny: JSON bodies, checked by the assertions
/**
 * GET /v1/router/requests through real processes: a router (its table in
 * a real nats-server's endpoints bucket) in front of two bare engines, an
 * `llmgw api --router-url` reading it and a router that is not there. The
 * answer counts each replica's requests as the router's metrics do, shows
 * one held in flight, and says which router could not be read.
 */
import assert from "node:assert/strict";
import { createServer, type Server, type ServerResponse } from "node:http";
import { after, before, describe, it } from "node:test";
import { jetstream } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { connectNats } from "../../src/log/index.js";
import { parseRouterMetrics } from "../../src/operator/router-requests.js";
import { EndpointsBucket } from "../../src/reconciler/runner/index.js";
import { type NatsServer, startServer, uniqueStream } from "../harness/nats.js";
import { type ApiProcess, spawnApi } from "../support/api-process.js";
import { eventually } from "../support/eventually.js";
import { rand } from "../support/gateway.js";
import { type RouterProc, startRouter } from "../support/router-process.js";

describe("GET /v1/router/requests (API, router and bare engines as processes)", () => {
  let server: NatsServer & { close(): Promise<void> };
  let nc: NatsConnection;
  let router: RouterProc | undefined;
  let api: ApiProcess | undefined;
  const engines: Array<{ id: string; url: string; server: Server }> = [];
  /** Answers the engine "hold" keeps back until the test lets them go. */
  const held: ServerResponse[] = [];
  const bucket = `ep_${rand()}`;

  before(async () => {
    server = await startServer();
    nc = await connectNats({ url: server.url, name: "test table writer" });
    for (const id of ["r-1", "r-2"]) {
      const s = createServer((req, res) => {
        let body = "";
        req.on("data", (c: Buffer) => (body += c));
        req.on("end", () => {
          if (body.includes('"hold"')) held.push(res);
          else res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ engine: id }));
        });
      });
      await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
      const a = s.address();
      engines.push({ id, url: `http://127.0.0.1:${typeof a === "object" && a ? a.port : 0}`, server: s });
    }
    const table = await EndpointsBucket.open(jetstream(nc), { bucket });
    await table.sync({
      chat: engines.map((e) => ({ replicaId: e.id, url: e.url, nodeId: "n" })),
      hold: [{ replicaId: "r-2", url: engines[1]!.url, nodeId: "n" }],
    });
    router = await startRouter(["--nats", server.url, "--endpoints-bucket", bucket, "--no-load-feed"]);
    await eventually(async () => ((await router!.healthz()).body.table?.endpoints?.chat ?? []).length === 2, {
      what: "the router to list both replicas",
    });
    api = await spawnApi([
      ...["--nats", server.url, "--stream", uniqueStream("RRQ"), "--subject-prefix", `rrq${rand()}.evt`],
      ...["--router-url", router.url, "--router-url", "http://127.0.0.1:1"],
    ]);
  });

  after(async () => {
    for (const r of held) r.destroy();
    api?.proc.kill("SIGTERM");
    await router?.close();
    for (const e of engines) e.server.close();
    await nc?.close();
    await server?.close();
  });

  it("counts each replica's requests, in total and in flight, as the router does", async () => {
    const r = router!;
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`${r.url}/v1/chat/completions`, {
        method: "POST",
        body: JSON.stringify({ model: "chat", messages: [] }),
      });
      assert.equal(res.status, 200);
      await res.json();
    }
    // One request the engine holds: in flight on r-2 until the test ends.
    const holding = fetch(`${r.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: "hold" }),
    }).catch(() => undefined);
    await eventually(() => held.length === 1, { what: "the engine to hold a request" });

    const t0 = Date.now();
    const res = await fetch(`${api!.url}/v1/router/requests`);
    assert.equal(res.status, 200);
    const body = (await res.json()) as any;
    assert.equal(body.routers.length, 2);
    const [read, missing] = body.routers;
    assert.equal(read.url, r.url);
    assert.equal(read.error, undefined);
    assert.ok(read.readAtMs >= t0 && read.readAtMs <= Date.now() + 1, "read when asked");
    assert.equal(missing.url, "http://127.0.0.1:1");
    assert.match(missing.error, /cannot read http:\/\/127\.0\.0\.1:1\/metrics/);

    const chat = body.replicas.filter((x: any) => x.model === "chat");
    assert.deepEqual(
      chat.map((x: any) => x.replicaId),
      ["r-1", "r-2"],
    );
    assert.equal(
      chat.reduce((a: number, x: any) => a + x.requests, 0),
      20,
    );
    // The same figures as the router's own metrics.
    for (const x of chat) {
      assert.equal(
        x.requests,
        await r.metric("llmgw_router_requests_total", { model: "chat", replica: x.replicaId }),
      );
      assert.equal(x.inFlight, 0);
      assert.equal(x.errors, 0);
    }
    const hold = body.replicas.find((x: any) => x.model === "hold");
    assert.deepEqual(hold, { replicaId: "r-2", model: "hold", requests: 0, inFlight: 1, errors: 0 });

    held[0]!.writeHead(200, { "content-type": "application/json" }).end("{}");
    await holding;
    const later = (await (await fetch(`${api!.url}/v1/router/requests`)).json()) as any;
    assert.deepEqual(
      later.replicas.find((x: any) => x.model === "hold"),
      { replicaId: "r-2", model: "hold", requests: 1, inFlight: 0, errors: 0 },
    );
  });

  it("reads label values with escapes and leaves out series no replica was reached for", () => {
    const text = [
      "# HELP llmgw_router_requests_total Requests",
      'llmgw_router_requests_total{model="a\\"b",replica="r-1",code="200"} 3',
      'llmgw_router_requests_total{model="a\\"b",replica="r-1",code="502"} 1',
      'llmgw_router_requests_total{model="",replica="",code="404"} 9',
      'llmgw_router_errors_total{model="a\\"b",replica="r-1",reason="upstream_failed"} 1',
      'llmgw_router_in_flight{model="a\\"b",replica="r-1"} 2',
      'llmgw_router_time_to_first_byte_seconds_bucket{le="0.001",model="a\\"b"} 4',
    ].join("\n");
    assert.deepEqual(parseRouterMetrics(text), [
      { replicaId: "r-1", model: 'a"b', requests: 4, inFlight: 2, errors: 1 },
    ]);
  });
});
