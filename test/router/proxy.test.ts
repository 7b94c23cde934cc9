// biome-ignore-all lint/suspicious/noExplicitAny: JSON bodies, checked by the assertions
/**
 * The router process against a real nats-server and bare HTTP engines in
 * this process, the routing table written to the endpoints bucket as the
 * leading reconciler writes it: API keys (per-key models, rate limits, a
 * file changed while running), prompt-prefix affinity, retries and ejection
 * of a replica that refuses or answers 503 before its first byte, and a
 * client that disconnects cancelling its upstream request; and the load
 * replicas report (UsageChanged appended to the log, as a gateway appends
 * it) steering requests away from a busy replica.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { connect } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { jetstream } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { newEvent } from "../../src/codec/index.js";
import { Writer_Kind } from "../../src/gen/llmgw/v1/events_pb.js";
import { connectNats, openLog } from "../../src/log/index.js";
import { EndpointsBucket } from "../../src/reconciler/runner/index.js";
import { type NatsServer, startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { rand } from "../support/gateway.js";
import { type RouterProc, startRouter } from "../support/router-process.js";

interface Engine {
  id: string;
  url: string;
  server: Server;
  hits: number;
  /** Requests whose client went away before the answer. */
  cancelled: number;
}

async function startEngine(
  id: string,
  handle?: (req: IncomingMessage, res: ServerResponse, e: Engine) => void,
) {
  const e: Engine = { id, url: "", server: undefined as unknown as Server, hits: 0, cancelled: 0 };
  e.server = createServer((req, res) => {
    e.hits++;
    const body: Buffer[] = [];
    req.on("data", (c: Buffer) => body.push(c));
    req.on("end", () => {
      if (handle) return handle(req, res, e);
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ engine: id }));
    });
  });
  await new Promise<void>((r) => e.server.listen(0, "127.0.0.1", r));
  const a = e.server.address();
  e.url = `http://127.0.0.1:${typeof a === "object" && a ? a.port : 0}`;
  return e;
}

const post = async (url: string, body: unknown, headers: Record<string, string> = {}) => {
  const res = await fetch(url, { method: "POST", headers, body: JSON.stringify(body) });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
};

describe("llmgw router: keys, affinity, retries and cancellation (router process, bare engines)", () => {
  let server: NatsServer & { close(): Promise<void> };
  let nc: NatsConnection;
  let table: EndpointsBucket;
  const bucket = `ep_${rand()}`;
  const engines: Engine[] = [];
  const routers: RouterProc[] = [];
  const dir = tempDir("router-proxy");
  /** A router on the test's bucket; without a log to read load from unless `extra` names one. */
  const route = async (extra: string[] = []) => {
    const r = await startRouter([
      ...["--nats", server.url, "--endpoints-bucket", bucket],
      ...(extra.includes("--stream") ? [] : ["--no-load-feed"]),
      ...extra,
    ]);
    routers.push(r);
    return r;
  };
  /** Waits until the router lists `want` endpoints of `model` (a count, or exactly these replica ids). */
  const ready = async (r: RouterProc, model: string, want: number | string[]) => {
    const deadline = Date.now() + 10_000;
    const listed = (ids: string[]) =>
      typeof want === "number"
        ? ids.length === want
        : JSON.stringify([...ids].sort()) === JSON.stringify([...want].sort());
    while (!listed((await r.healthz()).body.table?.endpoints?.[model] ?? [])) {
      assert.ok(
        Date.now() < deadline,
        `the router never listed ${String(want)} endpoints of ${model}:\n${r.output()}`,
      );
      await new Promise((res) => setTimeout(res, 50));
    }
  };

  before(async () => {
    server = await startServer();
    nc = await connectNats({ url: server.url, name: "test table writer" });
    table = await EndpointsBucket.open(jetstream(nc), { bucket });
    for (const id of ["r-1", "r-2", "r-3"]) engines.push(await startEngine(id));
  });

  after(async () => {
    for (const r of routers) await r.close();
    for (const e of engines) e.server.close();
    await nc?.close();
    await server?.close();
  });

  it("asks for a key, limits it to its models and its rate, and re-reads the file", async () => {
    const entries = (e: Engine[]) => e.map((x) => ({ replicaId: x.id, url: x.url, nodeId: "n" }));
    await table.sync({ chat: entries(engines.slice(0, 1)), embed: entries(engines.slice(1, 2)) });
    const sha = (k: string) => createHash("sha256").update(k).digest("hex");
    const keys = join(dir, "keys.yaml");
    writeFileSync(
      keys,
      `- name: chat-only\n  sha256: "${sha("key-a")}"\n  models: [chat]\n  requestsPerMinute: 3\n- name: all\n  sha256: "${sha("key-b")}"\n`,
    );
    const r = await route(["--api-keys", keys]);
    await ready(r, "embed", 1);
    const chat = `${r.url}/v1/chat/completions`;
    const bearer = (k: string) => ({ authorization: `Bearer ${k}` });
    assert.equal((await post(chat, { model: "chat" })).status, 401);
    const wrong = await post(chat, { model: "chat" }, bearer("nope"));
    assert.equal(wrong.status, 401);
    assert.equal(wrong.body.error.type, "authentication_error");
    const denied = await post(`${r.url}/v1/embeddings`, { model: "embed" }, bearer("key-a"));
    assert.equal(denied.status, 403);
    assert.match(denied.body.error.message, /chat-only may not use the model embed/);
    const listed = (await (await fetch(`${r.url}/v1/models`, { headers: bearer("key-a") })).json()) as any;
    assert.deepEqual(
      listed.data.map((m: any) => m.id),
      ["chat"],
    );
    for (let i = 0; i < 2; i++)
      assert.equal((await post(chat, { model: "chat" }, bearer("key-a"))).status, 200);
    const limited = await post(chat, { model: "chat" }, bearer("key-a"));
    assert.equal(limited.status, 200, "the third of 3 per minute");
    const over = await post(chat, { model: "chat" }, bearer("key-a"));
    assert.equal(over.status, 429);
    assert.ok(Number(over.headers.get("retry-after")) >= 1);
    assert.equal((await post(`${r.url}/v1/embeddings`, { model: "embed" }, bearer("key-b"))).status, 200);

    // A key added to the file works without a restart; an invalid file keeps the keys in force.
    writeFileSync(keys, `- name: new\n  sha256: "${sha("key-c")}"\n`);
    const deadline = Date.now() + 10_000;
    while ((await post(chat, { model: "chat" }, bearer("key-c"))).status !== 200) {
      assert.ok(Date.now() < deadline, `the new key was never accepted:\n${r.output()}`);
      await new Promise((res) => setTimeout(res, 200));
    }
    assert.equal((await post(chat, { model: "chat" }, bearer("key-b"))).status, 401, "the removed key");
    writeFileSync(keys, "- name: broken\n");
    await new Promise((res) => setTimeout(res, 2_500));
    assert.equal((await post(chat, { model: "chat" }, bearer("key-c"))).status, 200);
    assert.match(r.output(), /the changed API keys file is invalid/);
  });

  it("sends a prompt prefix to the same replica with --affinity prefix, and different ones over all", async () => {
    await table.sync({ chat: engines.map((x) => ({ replicaId: x.id, url: x.url, nodeId: "n" })) });
    const r = await route(["--affinity", "prefix", "--affinity-chars", "16"]);
    await ready(r, "chat", 3);
    const ask = (prompt: string) =>
      post(`${r.url}/v1/completions`, { model: "chat", prompt }).then((a) =>
        a.headers.get("x-llmgw-replica"),
      );
    const first = await ask("You are a helpful assistant. Question 1");
    for (let i = 2; i < 10; i++) assert.equal(await ask(`You are a helpful assistant. Question ${i}`), first);
    const spread = new Set<string | null>();
    for (let i = 0; i < 30; i++) spread.add(await ask(`${i} different system prompt`));
    assert.equal(spread.size, 3, `different prefixes went to ${[...spread].join(", ")}`);
  });

  it("retries a refused or 503 replica on another before the first byte, and keeps it out", async () => {
    const refused = await startEngine("refusing");
    refused.server.close();
    const busy = await startEngine("busy", (_req, res) => res.writeHead(503).end("overloaded"));
    engines.push(busy);
    const good = engines[0] as Engine;
    await table.sync({
      chat: [
        { replicaId: "busy", url: busy.url, nodeId: "n" },
        { replicaId: "good", url: good.url, nodeId: "n" },
        { replicaId: "refusing", url: refused.url, nodeId: "n" },
      ],
    });
    const r = await route(["--eject-ms", "60000"]);
    await ready(r, "chat", 3);
    const statuses: number[] = [];
    const served = new Set<string | null>();
    for (let i = 0; i < 20; i++) {
      const a = await post(`${r.url}/v1/chat/completions`, { model: "chat", messages: [] });
      statuses.push(a.status);
      served.add(a.headers.get("x-llmgw-replica"));
    }
    assert.deepEqual(new Set(statuses), new Set([200]), "every request answered by the good replica");
    assert.deepEqual([...served], ["good"]);
    assert.equal(await r.metric("llmgw_router_ejections_total", { replica: "busy" }), 1);
    assert.equal(await r.metric("llmgw_router_ejections_total", { replica: "refusing" }), 1);
    assert.ok(busy.hits <= 1, `the ejected replica was asked ${busy.hits} times`);

    // Nothing but failing replicas: a 502 naming each, after the bounded retries.
    await table.sync({ chat: [{ replicaId: "refusing", url: refused.url, nodeId: "n" }] });
    await ready(r, "chat", ["refusing"]);
    const failed = await post(`${r.url}/v1/chat/completions`, { model: "chat", messages: [] });
    assert.equal(failed.status, 502);
    assert.match(failed.body.error.message, /refusing: ECONNREFUSED/);

    // Nothing but overloaded replicas: their 503 reaches the client, with Retry-After.
    await table.sync({ chat: [{ replicaId: "busy", url: busy.url, nodeId: "n" }] });
    await ready(r, "chat", ["busy"]);
    const overloaded = await post(`${r.url}/v1/chat/completions`, { model: "chat", messages: [] });
    assert.equal(overloaded.status, 503);
    assert.equal(overloaded.body.error.code, "upstream_unavailable");
    assert.equal(overloaded.headers.get("retry-after"), "2");
  });

  it("cancels the upstream request when the client goes away", async () => {
    const slow = await startEngine("slow", (req, res, e) => {
      const timer = setTimeout(() => res.writeHead(200).end("{}"), 10_000);
      res.once("close", () => {
        clearTimeout(timer);
        if (!res.writableFinished) e.cancelled++;
      });
      void req;
    });
    engines.push(slow);
    await table.sync({ chat: [{ replicaId: "slow", url: slow.url, nodeId: "n" }] });
    const r = await route();
    await ready(r, "chat", 1);
    const abort = new AbortController();
    const pending = fetch(`${r.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: "chat" }),
      signal: abort.signal,
    }).catch(() => undefined);
    const deadline = Date.now() + 5_000;
    while (slow.hits === 0) {
      assert.ok(Date.now() < deadline, "the request never reached the engine");
      await new Promise((res) => setTimeout(res, 20));
    }
    abort.abort();
    await pending;
    while (slow.cancelled === 0) {
      assert.ok(Date.now() < deadline, "the engine's request was not cancelled");
      await new Promise((res) => setTimeout(res, 20));
    }
    assert.equal(await r.metric("llmgw_router_in_flight", { replica: "slow" }), 0);
  });

  it("weighs replicas by the queue depth and KV-cache use they report in the log", async () => {
    const stream = uniqueStream("RLOAD");
    const prefix = `rload${rand()}.evt`;
    const log = await openLog({ url: server.url, clientName: "test gateway", name: stream, prefix });
    try {
      const [a, b] = engines as [Engine, Engine];
      await table.sync({
        chat: [
          { replicaId: "chat-4-1", url: a.url, nodeId: "n1" },
          { replicaId: "chat-4-2", url: b.url, nodeId: "n2" },
        ],
      });
      const r = await route(["--stream", stream, "--subject-prefix", prefix]);
      await ready(r, "chat", 2);
      // The first replica's rank 0 reports a long queue and a full KV cache.
      await log.append(
        newEvent({
          id: `load-${rand()}`,
          timeUnixMs: BigInt(Date.now()),
          writer: { kind: Writer_Kind.GATEWAY, id: "gw-test" },
          body: {
            case: "usageChanged",
            value: {
              nodeId: "n1",
              sessionId: "sess-1",
              shardLoad: [{ shardId: "chat-4-1-s0-4", queueDepth: 40, kvCacheUse: 0.95 }],
            },
          },
        }),
      );
      const replicas = new Map<string, number>();
      const deadline = Date.now() + 10_000;
      for (;;) {
        replicas.clear();
        for (let i = 0; i < 20; i++) {
          const res = await post(`${r.url}/v1/chat/completions`, { model: "chat" });
          const id = res.headers.get("x-llmgw-replica") ?? "";
          replicas.set(id, (replicas.get(id) ?? 0) + 1);
        }
        if (replicas.get("chat-4-2") === 20) break;
        assert.ok(
          Date.now() < deadline,
          `the loaded replica still got requests: ${JSON.stringify([...replicas])}\n${r
            .output()
            .split("\n")
            .filter((l) => !l.includes('"msg":"request"'))
            .join("\n")}`,
        );
        await new Promise((res) => setTimeout(res, 100));
      }
    } finally {
      await log.jsm.streams.delete(stream).catch(() => {});
      await log.close();
    }
  });

  it("after a NATS restart, follows the table again: a change written then is applied", async () => {
    const [a, b] = engines as [Engine, Engine];
    await table.sync({ chat: [{ replicaId: "before", url: a.url, nodeId: "n" }] });
    const r = await route();
    await ready(r, "chat", 1);
    await server.stop();
    const deadline = Date.now() + 20_000;
    while ((await r.healthz()).body.status !== "stale") {
      assert.ok(Date.now() < deadline, `the router never said stale:\n${r.output()}`);
      await new Promise((res) => setTimeout(res, 100));
    }
    const during = await post(`${r.url}/v1/chat/completions`, { model: "chat" });
    assert.equal(during.status, 200, "served on the last table");
    await server.restart();
    // JetStream answers a moment after the server is back: the writer retries as the reconciler would.
    for (;;) {
      try {
        await table.sync({ chat: [{ replicaId: "after", url: b.url, nodeId: "n" }] });
        break;
      } catch (err) {
        assert.ok(Date.now() < deadline, `the table could not be written after the restart: ${String(err)}`);
        await new Promise((res) => setTimeout(res, 200));
      }
    }
    for (;;) {
      const h = await r.healthz();
      if (h.body.status === "ok" && h.body.table.endpoints.chat?.[0] === "after") break;
      assert.ok(
        Date.now() < deadline,
        `the change after the restart was not applied: ${JSON.stringify(h.body)}\n${r.output()}`,
      );
      await new Promise((res) => setTimeout(res, 100));
    }
    const res = await post(`${r.url}/v1/chat/completions`, { model: "chat" });
    assert.equal(res.headers.get("x-llmgw-replica"), "after");
  });

  it("stays up when clients reset mid-body, mid-answer, or send garbage", async () => {
    const slow = await startEngine("slow-2", (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: 1\n\n");
      setTimeout(() => res.end("data: [DONE]\n\n"), 300);
    });
    engines.push(slow);
    await table.sync({ chat: [{ replicaId: "slow-2", url: slow.url, nodeId: "n" }] });
    const r = await route();
    await ready(r, "chat", 1);
    const port = Number(new URL(r.url).port);
    const raw = (text: string, afterMs: number) =>
      new Promise<void>((resolve) => {
        const s = connect(port, "127.0.0.1", () => {
          s.write(text);
          setTimeout(() => {
            s.resetAndDestroy();
            resolve();
          }, afterMs);
        });
        s.on("error", () => resolve());
      });
    const head = (len: number) =>
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${len}\r\n\r\n`;
    await raw(`${head(1000)}{"model":"chat","messages":[`, 100);
    await raw(`${head(16)}{"model":"chat"}`, 100);
    await raw(`${head(5)}{"mod`, 50);
    await raw("GARBAGE / NOT-HTTP\r\n\r\n", 50);
    await raw(`POST /v1/completions HTTP/1.1\r\ncontent-length: abc\r\n\r\n`, 50);
    await new Promise((res) => setTimeout(res, 500));
    assert.equal((await r.healthz()).status, 200);
    assert.equal(r.proc.exitCode, null, r.output());
    const ok = await fetch(`${r.url}/v1/chat/completions`, { method: "POST", body: '{"model":"chat"}' });
    assert.equal(ok.status, 200);
    assert.match(await ok.text(), /data: \[DONE\]/);
    assert.equal(await r.metric("llmgw_router_in_flight", { replica: "slow-2" }), 0);
  });
});
