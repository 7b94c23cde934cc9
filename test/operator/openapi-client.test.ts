/**
 * The typed client of the operator API: its types (src/gen/api/schema.ts)
 * are what the OpenAPI document generates now, and the client the CLI and
 * the UI call through (openapi-fetch over those types) works against a real
 * API on a real nats-server — answers, the server's 4xx messages and field
 * issues, a wrong token, an unreachable API, the live position stream — and
 * the CLI prints what it answers.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { API_TYPES_PATH, apiTypesSource, GEN_API_COMMAND } from "../../scripts/gen-api.js";
import { ApiCallError, ApiClient } from "../../src/operator/index.js";
import { tempDir } from "../harness/nats.js";
import { runCli } from "../support/cli.js";
import { apiSuite, TOKEN } from "../support/operator-api.js";
import { unreachablePort } from "../support/unreachable.js";

describe("the API's generated types", () => {
  it("are what the OpenAPI document generates now", async () => {
    const checkedIn = readFileSync(new URL(`../../${API_TYPES_PATH}`, import.meta.url), "utf8");
    const fresh = await apiTypesSource();
    if (checkedIn === fresh) return;
    const a = checkedIn.split("\n");
    const b = fresh.split("\n");
    let line = 0;
    while (line < a.length && a[line] === b[line]) line++;
    assert.fail(
      `${API_TYPES_PATH} is stale: the OpenAPI document changed (first difference at line ${line + 1}: ` +
        `checked in ${JSON.stringify(a[line] ?? "<end>")}, generated ${JSON.stringify(b[line] ?? "<end>")}). ` +
        `Run \`${GEN_API_COMMAND}\` and commit the result.`,
    );
  });
});

/**
 * Never run: the type checker (tsc over test/) proves that a route, a
 * parameter or an answer field the document lacks is an error at the caller.
 */
export function typeErrorsOfDrift(client: ApiClient): void {
  // @ts-expect-error: no such route
  void client.send((api) => api.GET("/v1/node"));
  // @ts-expect-error: the node route's path parameter is `id`
  void client.send((api) => api.GET("/v1/nodes/{id}", { params: { path: { node: "gpu-a1" } } }));
  // @ts-expect-error: listReplicas has no `node` filter
  void client.send((api) => api.GET("/v1/replicas", { params: { query: { node: "gpu-a1" } } }));
  void client
    .send((api) => api.GET("/v1/nodes/{id}", { params: { path: { id: "gpu-a1" } } }))
    // @ts-expect-error: a node's view has no `hostname`
    .then(({ body }) => body.node.hostname);
}

describe("the typed client against a real API", () => {
  const suite = apiSuite();
  const client = () => new ApiClient({ url: suite.fx.api.url, token: TOKEN });

  it("reads nodes, one node, filtered replicas and a page of events", async () => {
    const c = client();
    const nodes = await c.send((api) => api.GET("/v1/nodes"));
    assert.deepEqual(
      nodes.body.nodes.map((n) => n.nodeId),
      ["gpu-a1", "gpu-a2", "gpu-b1"],
    );
    const one = await c.send((api) => api.GET("/v1/nodes/{id}", { params: { path: { id: "gpu-a2" } } }));
    assert.equal(one.body.node.nodeId, "gpu-a2");
    assert.equal(one.body.seq, suite.last);

    const replicas = await c.send((api) =>
      api.GET("/v1/replicas", { params: { query: { model: "llama-3.3-70b" } } }),
    );
    assert.ok(replicas.body.replicas.length > 0);
    assert.ok(replicas.body.replicas.every((r) => r.model === "llama-3.3-70b"));

    const page = await c.send((api) => api.GET("/v1/events", { params: { query: { after: 0, limit: 2 } } }));
    assert.deepEqual(
      page.body.events.map((e) => e.seq),
      [1, 2],
    );
    assert.equal(page.body.next, 2);
    assert.equal(page.body.lastSeq, suite.last);
  });

  it("raises the server's code, message and field issues; a wrong token and no API say what to do", async () => {
    const c = client();
    const missing = await c
      .send((api) => api.GET("/v1/nodes/{id}", { params: { path: { id: "gpu-zz9" } } }))
      .then(
        () => assert.fail("an unknown node answered"),
        (err: unknown) => err,
      );
    assert.ok(missing instanceof ApiCallError);
    assert.equal(missing.status, 404);
    assert.equal(missing.code, "not-found");
    assert.match(missing.message, /gpu-zz9/);

    const badQuery = await c
      .send((api) => api.GET("/v1/events", { params: { query: { limit: -1 } } }))
      .catch((err: unknown) => err);
    assert.ok(badQuery instanceof ApiCallError);
    assert.equal(badQuery.status, 400);
    assert.equal(badQuery.code, "invalid-argument");
    assert.match(badQuery.message, /limit/);

    // The catalog goes as written (YAML); the server names each bad field.
    const badCatalog = await c
      .applyCatalogText("models:\n  - name: m\n    replicas: -2\n", "yaml")
      .catch((err: unknown) => err);
    assert.ok(badCatalog instanceof ApiCallError);
    assert.equal(badCatalog.status, 400);
    assert.ok(badCatalog.issues.length > 0, "field issues are kept");
    assert.ok(badCatalog.issues.some((i) => /replicas/.test(i.path)));

    const wrongToken = await new ApiClient({ url: suite.fx.api.url, token: "not-the-token" })
      .send((api) => api.GET("/v1/nodes"))
      .catch((err: unknown) => err);
    assert.ok(wrongToken instanceof ApiCallError);
    assert.equal(wrongToken.status, 401);
    assert.equal(wrongToken.code, "unauthorized");

    const dead = await unreachablePort();
    try {
      const url = `http://127.0.0.1:${dead.port}`;
      const unreachable = await new ApiClient({ url, token: TOKEN })
        .send((api) => api.GET("/v1/nodes"))
        .catch((err: unknown) => err);
      assert.ok(unreachable instanceof ApiCallError);
      assert.equal(unreachable.status, 0);
      assert.equal(unreachable.code, "unreachable");
      assert.match(
        unreachable.message,
        new RegExp(`cannot reach the API at ${url} .*--api or LLMGW_API_URL`),
      );
    } finally {
      await dead.close();
    }
  });

  it("follows the live position until the caller stops", async () => {
    const stop = new AbortController();
    const seen: number[] = [];
    for await (const p of client().followPosition(stop.signal)) {
      seen.push(p.seq);
      assert.equal(typeof p.timeMs, "number");
      if (p.seq >= suite.last) stop.abort();
    }
    assert.ok(seen.length > 0);
    assert.equal(seen.at(-1), suite.last);
  });

  it("is what the CLI prints: `llmgw nodes -o json` answers as the client does", async () => {
    const { body } = await client().send((api) => api.GET("/v1/nodes"));
    const r = await runCli(["nodes", "-o", "json"], {
      env: { ...suite.cliEnv, LLMGW_CONFIG: join(tempDir("no-contexts"), "config.yaml") },
      timeoutMs: 60_000,
    });
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), body);

    const missing = await runCli(["describe", "node", "gpu-zz9"], {
      env: { ...suite.cliEnv, LLMGW_CONFIG: join(tempDir("no-contexts"), "config.yaml") },
      timeoutMs: 60_000,
    });
    assert.equal(missing.code, 2, "a 404 is the caller's mistake: exit 2");
    assert.match(missing.stderr, /gpu-zz9/);
  });
});
