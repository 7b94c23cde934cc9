// biome-ignore-all lint/suspicious/noExplicitAny: API and router bodies are loosely typed JSON, checked by the assertions
/**
 * `llmgw router` with every real part: nats-server, a gateway, a `llmgw
 * reconciler` process, the operator API, three real `llmgw agent` processes
 * whose fake engines answer the OpenAI API, and the router process, driven
 * by HTTP clients. The scenarios run in order on one fleet (each leaves it
 * as the next expects): spread and streaming, bad input, a scale-up, a
 * drain under load, an engine killed under load, a scale-down to 0 and a
 * NATS restart.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type NatsServer, startServer } from "../harness/nats.js";
import {
  type AgentProc,
  engineRecord,
  killRecordedEngines,
  startAgent,
  until,
  writeAgentConfig,
  writeGpus,
} from "../support/agent-process.js";
import { type Answer, chat, type RouterProc, startRouter } from "../support/router-process.js";
import { type Stack, startStack } from "../support/stack.js";

const NODES = ["rt-a", "rt-b", "rt-c"];
const profile = { name: "tp1", gpusPerShard: 1, memoryPerGpu: "16GiB" };
const catalog = (chatReplicas: number, embedReplicas: number) => ({
  models: [
    { name: "chat", replicas: chatReplicas, profiles: [profile] },
    { name: "embed", replicas: embedReplicas, profiles: [profile] },
  ],
});
const MAX_BODY = 64 * 1024;

/** `clients` loops sending chat requests until `total` were sent; `during` runs beside them. */
async function load(
  url: string,
  o: { clients: number; total: number; during?: (sent: () => number) => Promise<void> },
): Promise<Answer[]> {
  const answers: Answer[] = [];
  let sent = 0;
  const client = async () => {
    while (sent < o.total) {
      sent++;
      answers.push(await chat(url, "chat"));
    }
  };
  await Promise.all([...Array.from({ length: o.clients }, client), o.during?.(() => sent)]);
  return answers;
}

const count = (answers: Answer[]) => {
  const by = new Map<string, number>();
  for (const a of answers) by.set(a.replica, (by.get(a.replica) ?? 0) + 1);
  return by;
};

describe("llmgw router: an OpenAI API that follows the routing table (real processes)", () => {
  let server: NatsServer & { close(): Promise<void> };
  let stack: Stack;
  let router: RouterProc;
  const agents: AgentProc[] = [];
  const dirs: string[] = [];
  const why = async () =>
    `\nrouter:\n${router?.output().slice(-3000)}\nhealthz: ${JSON.stringify(await router?.healthz().catch(() => ({})))}${await stack?.why()}`;
  const endpoints = async (model: string): Promise<string[]> =>
    (await router.healthz()).body.table.endpoints[model] ?? [];
  const replicaOf = async (replicaId: string) =>
    (await stack.call("GET", "/v1/replicas")).replicas.find((r: any) => r.replicaId === replicaId);

  before(async () => {
    server = await startServer();
    stack = await startStack(server.url, { name: "router", reconciler: { policy: "spread" } });
    for (const nodeId of NODES) {
      const dir = mkdtempSync(join(tmpdir(), "llmgw-router-"));
      dirs.push(dir);
      writeGpus(dir, [{}, {}, {}], [[0, 1, 2]]);
      writeAgentConfig(dir, { startDelayMs: 200, requestDelayMs: 40, stopGraceSeconds: 5 });
      agents.push(startAgent(dir, { gateways: [stack.gw.url], nodeId }));
    }
    router = await startRouter([
      ...stack.logFlags,
      "--eject-ms",
      "3000",
      "--max-body-bytes",
      String(MAX_BODY),
    ]);
    await until(
      "the nodes registered",
      async () => ((await stack.call("GET", "/v1/nodes")).nodes.length === 3 ? true : undefined),
      { timeoutMs: 30_000, why },
    );
    await stack.call("PUT", "/v1/catalog", catalog(2, 1));
    await until(
      "the router routing to 2 chat and 1 embed replicas",
      async () =>
        (await endpoints("chat")).length === 2 && (await endpoints("embed")).length === 1 ? true : undefined,
      { timeoutMs: 30_000, why },
    );
  });

  after(async () => {
    await router?.close();
    for (const a of agents) a.proc.kill("SIGKILL");
    for (const d of dirs) {
      killRecordedEngines(d);
      rmSync(d, { recursive: true, force: true });
    }
    await stack?.close();
    await server?.close();
  });

  it("spreads requests over the ready replicas, streams chunk by chunk, lists models from the table", async () => {
    const answers = await load(router.url, { clients: 4, total: 40 });
    assert.deepEqual(
      answers.filter((a) => a.status !== 200),
      [],
    );
    const ready = await endpoints("chat");
    const by = count(answers);
    assert.deepEqual([...by.keys()].sort(), [...ready].sort(), "every ready replica got requests");
    for (const [replica, n] of by) assert.ok(n >= 8, `${replica} got only ${n} of 40`);
    for (const a of answers) {
      const text = JSON.parse(a.body).choices[0].message.content as string;
      assert.match(
        text,
        new RegExp(`replica ${a.replica} shard ${a.replica}-s0-`),
        "the engine that answered is the replica named",
      );
    }

    const res = await fetch(`${router.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "chat", stream: true, messages: [{ role: "user", content: "hi" }] }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^text\/event-stream/);
    const reads: string[] = [];
    const decoder = new TextDecoder();
    for await (const chunk of res.body as AsyncIterable<Uint8Array>) reads.push(decoder.decode(chunk));
    const events = reads
      .join("")
      .split("\n\n")
      .filter((e) => e.startsWith("data: "));
    assert.ok(
      reads.length >= 3,
      `the stream arrived in ${reads.length} chunk(s): not passed through as it came`,
    );
    assert.equal(events.at(-1), "data: [DONE]");
    const words = events
      .slice(0, -1)
      .map((e) => JSON.parse(e.slice(6)).choices[0].delta.content ?? "")
      .join("");
    assert.match(words, /^Hello from replica /);

    const embedding = await fetch(`${router.url}/v1/embeddings`, {
      method: "POST",
      body: JSON.stringify({ model: "embed", input: ["abc"] }),
    });
    assert.equal(embedding.status, 200);
    assert.equal(embedding.headers.get("x-llmgw-replica"), (await endpoints("embed"))[0]);
    const models = (await (await fetch(`${router.url}/v1/models`)).json()) as any;
    assert.deepEqual(
      models.data.map((m: any) => m.id),
      ["chat", "embed"],
    );
  });

  it("answers each bad input with its documented error and stays up", async () => {
    const post = async (path: string, body: string | Uint8Array, headers: Record<string, string> = {}) => {
      const res = await fetch(`${router.url}${path}`, { method: "POST", headers, body });
      return { status: res.status, headers: res.headers, body: (await res.json()) as any };
    };
    const unknown = await post("/v1/chat/completions", JSON.stringify({ model: "gpt-4", messages: [] }));
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.error.code, "model_not_found");
    assert.equal(unknown.body.error.type, "invalid_request_error");
    assert.match(unknown.body.error.message, /gpt-4/);
    const cases: Array<[string, string | Uint8Array, number, RegExp]> = [
      ["/v1/chat/completions", "{not json", 400, /not valid JSON/],
      ["/v1/completions", JSON.stringify({ prompt: "hi" }), 400, /no "model"/],
      ["/v1/completions", JSON.stringify({ model: 42 }), 400, /must be a string/],
      ["/v1/completions", "", 400, /empty/],
      ["/v1/completions", "[]", 400, /JSON object/],
      [
        "/v1/chat/completions",
        JSON.stringify({ model: "chat", messages: [{ role: "user", content: "x".repeat(MAX_BODY) }] }),
        413,
        /larger than 65536 bytes/,
      ],
    ];
    for (const [path, body, status, message] of cases) {
      const r = await post(path, body);
      assert.equal(r.status, status, `${path} ${String(body).slice(0, 40)}: ${JSON.stringify(r.body)}`);
      assert.match(r.body.error.message, message);
    }
    // Too large, announced by a chunked body rather than a length.
    const big = new Uint8Array(MAX_BODY + 1).fill(32);
    big.set(new TextEncoder().encode('{"model":"chat","x":"'), 0);
    const chunked = await fetch(`${router.url}/v1/completions`, {
      method: "POST",
      body: new ReadableStream({
        start(c) {
          c.enqueue(big.slice(0, 1000));
          c.enqueue(big.slice(1000));
          c.close();
        },
      }),
      duplex: "half",
    } as RequestInit);
    assert.equal(chunked.status, 413);
    const get = await fetch(`${router.url}/v1/chat/completions`);
    assert.equal(get.status, 405);
    const nowhere = await fetch(`${router.url}/v2/anything`);
    assert.equal(nowhere.status, 404);
    assert.ok(((await nowhere.json()) as any).error.message);
    const huge = await fetch(`${router.url}/v1/models`, { headers: { "x-big": "y".repeat(20_000) } });
    assert.equal(huge.status, 431);

    assert.equal((await router.healthz()).status, 200);
    assert.equal((await chat(router.url, "chat")).status, 200, "the router still serves");
    assert.equal(router.proc.exitCode, null);
  });

  it("sends traffic to a new replica within one table change", async () => {
    const before = await endpoints("chat");
    const changesBefore = (await router.healthz()).body.table.changes as number;
    await stack.call("PATCH", "/v1/models/chat", { replicas: 3 });
    const added = await until(
      "the third chat replica in the router's table",
      async () => {
        const now = await endpoints("chat");
        return now.length === 3 ? now.find((r) => !before.includes(r)) : undefined;
      },
      { timeoutMs: 30_000, why },
    );
    assert.equal(
      (await router.healthz()).body.table.changes,
      changesBefore + 1,
      "one table change added the replica",
    );
    const answers = await load(router.url, { clients: 4, total: 30 });
    assert.ok((count(answers).get(added) ?? 0) > 0, `the new replica ${added} got none of 30 requests`);
  });

  it("drains a node while 4 clients send 200 requests: none fails, and the replica gets none once out of the table", async () => {
    const ready = await endpoints("chat");
    const victim = ready[0] as string;
    const node = (await replicaOf(victim)).nodeIds[0] as string;
    let leftAt = Number.POSITIVE_INFINITY;
    const answers = await load(router.url, {
      clients: 4,
      total: 200,
      during: async (sent) => {
        while (sent() < 40) await new Promise((r) => setTimeout(r, 10));
        await stack.call("POST", `/v1/nodes/${node}/drain`, { reason: "router test" });
        while (sent() < 200) {
          const t = performance.now();
          if (!(await endpoints("chat")).includes(victim)) {
            leftAt = t;
            return;
          }
          await new Promise((r) => setTimeout(r, 10));
        }
      },
    });
    assert.deepEqual(
      answers.filter((a) => a.status !== 200).map((a) => [a.status, a.body.slice(0, 200), a.error]),
      [],
      "no request failed",
    );
    assert.ok(
      Number.isFinite(leftAt),
      `${victim} never left the table during the 200 requests${await why()}`,
    );
    const late = answers.filter((a) => a.replica === victim && a.startMs > leftAt);
    assert.deepEqual(
      late.length,
      0,
      `${late.length} requests sent after ${victim} left the table went to it`,
    );
    assert.ok(
      answers.some((a) => a.replica === victim),
      "the drained replica served before it left",
    );
  });

  it("an engine killed with kill -9 under load: only requests it held may fail, new ones go elsewhere", async () => {
    await until(
      "three chat replicas ready again",
      async () => ((await endpoints("chat")).length === 3 ? true : undefined),
      { timeoutMs: 30_000, why },
    );
    const victim = (await endpoints("chat"))[0] as string;
    const pid = await until(
      "the victim's engine record",
      async () => {
        for (const d of dirs) {
          // Each engine records itself as <shard id>.json; the replica's rank 0 is <replica>-s0-<seq>.
          const r = readdirSync(d).find((f) => f.startsWith(`${victim}-s0-`) && f.endsWith(".json"));
          if (r) return engineRecord(d, r.slice(0, -5)).pid;
        }
        return undefined;
      },
      { timeoutMs: 5000, why },
    );
    let killedAt = Number.POSITIVE_INFINITY;
    const answers = await load(router.url, {
      clients: 4,
      total: 160,
      during: async (sent) => {
        while (sent() < 40) await new Promise((r) => setTimeout(r, 10));
        killedAt = performance.now();
        process.kill(pid, "SIGKILL");
      },
    });
    const failed = answers.filter((a) => a.status !== 200);
    // At most the 4 requests in flight at the kill: a request the engine held dies with it.
    assert.ok(failed.length <= 4, `${failed.length} requests failed: ${JSON.stringify(failed.slice(0, 5))}`);
    const afterKill = answers.filter((a) => a.startMs > killedAt);
    assert.ok(afterKill.length >= 100);
    assert.deepEqual(
      afterKill.filter((a) => a.replica === victim),
      [],
      "no answer from the killed engine",
    );
    // Attempts on the dead engine after the kill: the requests it held (retried elsewhere), then
    // at most one refused connection before it is ejected or out of the table.
    const attempts =
      (await router.metric("llmgw_router_retries_total", { replica: victim })) +
      (await router.metric("llmgw_router_errors_total", { replica: victim }));
    assert.ok(attempts <= 8, `${attempts} attempts went to the dead engine: it was not kept out`);
  });

  it("a model scaled to 0 gets 503 with Retry-After", async () => {
    await stack.call("PATCH", "/v1/models/embed", { replicas: 0 });
    const res = await until(
      "the router answering 503 for embed",
      async () => {
        const r = await fetch(`${router.url}/v1/embeddings`, {
          method: "POST",
          body: JSON.stringify({ model: "embed", input: "x" }),
        });
        const body = (await r.json()) as any;
        return r.status === 503 ? { headers: r.headers, body } : undefined;
      },
      { timeoutMs: 30_000, why },
    );
    assert.equal(res.headers.get("retry-after"), "2");
    assert.equal(res.body.error.code, "no_ready_replica");
    const models = (await (await fetch(`${router.url}/v1/models`)).json()) as any;
    assert.deepEqual(
      models.data.map((m: any) => m.id),
      ["chat"],
    );
  });

  it("keeps routing on its last table through a NATS restart, and says so", async () => {
    const table = await endpoints("chat");
    assert.ok(table.length >= 2);
    await server.stop();
    try {
      await until(
        "the router reporting its table stale",
        async () => ((await router.healthz()).body.status === "stale" ? true : undefined),
        { timeoutMs: 20_000, why },
      );
      assert.equal(await router.metric("llmgw_router_table_stale"), 1);
      const h = await router.healthz();
      assert.equal(h.status, 200, "a stale router still serves");
      assert.deepEqual(h.body.table.endpoints.chat, table);
      const answers = await load(router.url, { clients: 4, total: 40 });
      assert.deepEqual(
        answers.filter((a) => a.status !== 200),
        [],
      );
      assert.ok(count(answers).size >= 2, "still spread over the table's replicas");
    } finally {
      await server.restart();
    }
    await until(
      "the router following the table again",
      async () => ((await router.healthz()).body.status === "ok" ? true : undefined),
      { timeoutMs: 30_000, why },
    );
    assert.equal(await router.metric("llmgw_router_table_stale"), 0);
    assert.equal((await chat(router.url, "chat")).status, 200);
  });
});
