// biome-ignore-all lint/suspicious/noExplicitAny: response bodies are loosely typed JSON, checked against the document
/**
 * The OpenAPI document against the real API on a real nats-server: every
 * route the server registers is in the document (and nothing else is), and
 * every answer of every route, called with real data, matches the schema
 * the document gives for its status — checked by a JSON Schema 2020-12
 * validator (ajv), the dialect of OpenAPI 3.1.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { headers as natsHeaders } from "@nats-io/transport-node";
import { Ajv2020 } from "ajv/dist/2020.js";
import { EngineLogSubjects, REPLY_KIND_HEADER } from "../../src/engine-logs/index.js";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { openApiPath } from "../../src/operator/openapi.js";
import { isUiPath } from "../../src/operator/routes/ui.js";
import { type NatsServer, startServer } from "../harness/nats.js";
import { Fleet, llama70b } from "../support/fleet.js";
import { type ApiFixture, appendAll, smallFleet, startApiFixture, TOKEN } from "../support/operator-api.js";

const example = readFileSync(new URL("../../examples/catalog.yaml", import.meta.url), "utf8");

describe("OpenAPI document", () => {
  let server: NatsServer & { close(): Promise<void> };
  let fx: ApiFixture;
  let doc: any;
  let ajv: Ajv2020;
  /** Operations answered 200 at least once: "get /v1/nodes/{id}". */
  const answered = new Set<string>();

  before(async () => {
    server = await startServer();
    fx = await startApiFixture(server.url);
    const last = await appendAll(fx.log, smallFleet());
    await fx.api.runtime.waitFor(last);
    const r = await fx.call("/openapi.json", { token: null });
    assert.equal(r.status, 200, "the document is open like the probes");
    doc = r.body;
    ajv = new Ajv2020({ allErrors: true });
    // Strict about the schemas themselves; `components` is only the wrapper that holds them.
    ajv.addVocabulary(["components"]);
    // The components under one id, so the document's `#/components/schemas/…` references resolve.
    ajv.addSchema({ $id: "llmgw-api", components: { schemas: doc.components.schemas } });
  });
  after(async () => {
    await fx?.close();
    await server?.close();
  });

  /** Calls the API and checks the answer against what the document says for that operation and status. */
  async function check(
    method: string,
    template: string,
    path: string,
    init: Parameters<ApiFixture["call"]>[1] = {},
  ) {
    const op = doc.paths[openApiPath(template)]?.[method.toLowerCase()];
    assert.ok(op, `${method} ${template} is not in the document`);
    const res = await fx.call(path, { ...init, method });
    const documented = op.responses[String(res.status)];
    assert.ok(documented, `${method} ${path} answered ${res.status}, which the document does not list`);
    const type = (res.headers.get("content-type") ?? "").split(";")[0]!.trim();
    const content = documented.content?.[type];
    assert.ok(
      content,
      `${method} ${path} answered ${type}, the document lists ${Object.keys(documented.content ?? {})}`,
    );
    if (type === "application/json" && content.schema.$ref) {
      const validate = ajv.getSchema(`llmgw-api${content.schema.$ref}`);
      assert.ok(validate, `no schema ${content.schema.$ref}`);
      assert.ok(
        validate(res.body),
        `${method} ${path} (${res.status}) does not match ${content.schema.$ref}: ${ajv.errorsText(validate.errors)}`,
      );
    }
    if (res.status === 200) answered.add(`${method.toLowerCase()} ${openApiPath(template)}`);
    return res;
  }

  it("is OpenAPI 3.1 and describes exactly the routes the server has", () => {
    assert.equal(doc.openapi, "3.1.0");
    const served = new Set(
      fx.api.routes
        .filter((r) => r.method !== "HEAD" && !isUiPath(r.url) && !r.url.includes("*"))
        .map((r) => `${r.method.toLowerCase()} ${openApiPath(r.url)}`),
    );
    const documented = new Set(
      Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops as object).map((m) => `${m} ${p}`)),
    );
    for (const r of served) assert.ok(documented.has(r), `the server has ${r}, the document does not`);
    for (const d of documented) assert.ok(served.has(d), `the document has ${d}, the server does not`);
    assert.ok(served.size >= 20, `only ${served.size} routes seen`);
  });

  it("is valid against the OpenAPI 3.1 meta-schema (the OpenAPI Initiative's, vendored in test/fixtures)", () => {
    // ajv resolves `$dynamicRef: "#meta"` to the document's root rather than to
    // the `$dynamicAnchor: meta` of `$defs/schema`; with no other dialect in play
    // the static reference to that definition means the same.
    const metaSchema = JSON.parse(
      readFileSync(new URL("../fixtures/openapi-3.1-schema.json", import.meta.url), "utf8").replaceAll(
        '"$dynamicRef": "#meta"',
        '"$ref": "#/$defs/schema"',
      ),
    );
    const meta = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
    const validate = meta.compile(metaSchema);
    assert.ok(validate(doc), JSON.stringify(validate.errors?.slice(0, 5), null, 2));
    // A document the meta-schema must refuse, so the check is known to bite.
    const broken = (change: Record<string, unknown>) => Object.assign(structuredClone(doc), change);
    assert.equal(validate(broken({ paths: { "/v1/x": { get: { responses: "none" } } } })), false);
    assert.equal(validate(broken({ info: { title: "no version" } })), false);
  });

  it("tags every operation and names its id by hand (listNodes, cordonNode …)", () => {
    const tags = new Set((doc.tags as Array<{ name: string }>).map((t) => t.name));
    const ids = new Map<string, string>();
    for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
      for (const [method, op] of Object.entries(ops)) {
        assert.equal(op.tags?.length, 1, `${method} ${path} has no tag`);
        assert.ok(tags.has(op.tags[0]), `${method} ${path}: tag ${op.tags[0]} is not in the document's tags`);
        assert.match(op.operationId, /^[a-z][A-Za-z]+$/, `${method} ${path}`);
        ids.set(`${method} ${path}`, op.operationId);
      }
    }
    assert.equal(ids.get("get /v1/nodes"), "listNodes");
    assert.equal(ids.get("post /v1/nodes/{id}/cordon"), "cordonNode");
    assert.equal(ids.get("post /v1/nodes/{id}/gpus/{index}/clear"), "clearGpu");
    assert.equal(ids.get("get /v1/replay"), "replayFleet");
    assert.equal(ids.get("post /v1/what-if"), "runWhatIf");
  });

  it("is whole: every reference resolves, operation ids are unique, path parameters are declared", () => {
    const refs = new Set<string>();
    const walk = (v: unknown): void => {
      if (Array.isArray(v)) v.forEach(walk);
      else if (v && typeof v === "object") {
        for (const [k, x] of Object.entries(v)) {
          if (k === "$ref" && typeof x === "string") refs.add(x);
          else walk(x);
        }
      }
    };
    walk(doc);
    for (const r of refs) {
      const id = /^#\/components\/schemas\/([A-Za-z0-9_]+)$/.exec(r)?.[1];
      assert.ok(id && doc.components.schemas[id], `${r} resolves to nothing`);
    }
    const ids: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
      for (const [method, op] of Object.entries(ops)) {
        ids.push(op.operationId);
        assert.ok(op.summary, `${method} ${path} has no summary`);
        assert.ok(op.responses["200"], `${method} ${path} documents no success`);
        for (const name of [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1])) {
          assert.ok(
            op.parameters.some((p: any) => p.in === "path" && p.name === name && p.required),
            `${method} ${path} does not declare its path parameter ${name}`,
          );
        }
      }
    }
    assert.equal(new Set(ids).size, ids.length, `operation ids repeat: ${ids}`);
  });

  it("matches every real answer, successes and errors", async () => {
    await check("GET", "/healthz", "/healthz", { token: null });
    await check("GET", "/readyz", "/readyz", { token: null });
    const nodes = await check("GET", "/v1/nodes", "/v1/nodes");
    assert.equal(nodes.body.nodes.length, 3);
    await check("GET", "/v1/nodes/:id", "/v1/nodes/gpu-a1");
    assert.equal((await check("GET", "/v1/nodes/:id", "/v1/nodes/gpu-zz")).status, 404);
    assert.equal((await check("GET", "/v1/nodes/:id", "/v1/nodes/Not_A_Name")).status, 400);
    assert.equal((await check("GET", "/v1/nodes", "/v1/nodes", { token: "wrong-token-123" })).status, 401);

    const replicas = await check("GET", "/v1/replicas", "/v1/replicas");
    assert.equal(replicas.body.replicas.length, 3);
    assert.ok(replicas.body.models.length > 0);
    assert.equal((await check("GET", "/v1/replicas", "/v1/replicas?phase=lost")).status, 400);
    await check("GET", "/v1/replicas/:id", "/v1/replicas/r-70b-1");
    for (const id of ["r-405b-1", "r-70b-2"]) {
      const ex = await check("GET", "/v1/replicas/:id/explain", `/v1/replicas/${id}/explain`);
      assert.ok(ex.body.placement !== null || ex.body.pending !== null, `${id} has no decision`);
      await check("GET", "/v1/replicas/:id/history", `/v1/replicas/${id}/history`);
    }
    await check("GET", "/v1/replicas/:id/explain", "/v1/replicas/r-405b-1/explain?at=3");
    assert.equal((await check("GET", "/v1/replicas/:id", "/v1/replicas/r-never")).status, 404);

    const events = await check("GET", "/v1/events", "/v1/events?limit=3");
    assert.equal(events.body.events.length, 3);
    await check("GET", "/v1/events", "/v1/events?kind=reconcilePass");
    assert.equal((await check("GET", "/v1/events", "/v1/events?limit=0")).status, 400);
    await check("GET", "/v1/endpoints", "/v1/endpoints");
    await check("GET", "/v1/endpoints", "/v1/endpoints?model=llama-3.3-70b");
    assert.equal((await check("GET", "/v1/endpoints", "/v1/endpoints?model=no-such-model")).status, 404);
    await check("GET", "/v1/fleet", "/v1/fleet");
    await check("GET", "/v1/fleet", "/v1/fleet?at=4");
    await check("GET", "/v1/events", "/v1/events?subject=session.*,catalog");
    await check("GET", "/v1/replay", "/v1/replay?at=4");
    await check("GET", "/v1/replay", "/v1/replay?node=gpu-b1");
    assert.equal((await check("GET", "/v1/replay", "/v1/replay?replica=r-nope")).status, 404);
    assert.equal((await check("GET", "/v1/replay", "/v1/replay?at=4&time=2026-01-01T00:00:00Z")).status, 400);
    await check("GET", "/v1/explain/replica/:id", "/v1/explain/replica/r-70b-1");
    await check("GET", "/v1/explain/node/:id", "/v1/explain/node/gpu-b1?at=4");
    assert.equal((await check("GET", "/v1/explain/node/:id", "/v1/explain/node/a..b")).status, 400);

    const catalog = await check("GET", "/v1/catalog", "/v1/catalog");
    const etag = catalog.headers.get("etag") ?? "";
    const yaml = { "content-type": "application/yaml", "if-match": etag };
    const applied = await check("PUT", "/v1/catalog", "/v1/catalog", { body: example, headers: yaml });
    assert.equal(applied.status, 200);
    const stale = await check("PUT", "/v1/catalog", "/v1/catalog", { body: example, headers: yaml });
    assert.equal(stale.status, 412);
    const bad = await check("PUT", "/v1/catalog", "/v1/catalog", {
      body: "models: [{name: x}]",
      headers: { "content-type": "application/yaml" },
    });
    assert.equal(bad.status, 400);
    await check("GET", "/v1/catalog", "/v1/catalog");
    const scaled = await check("PATCH", "/v1/models/:model", "/v1/models/llama-3.1-8b", {
      body: JSON.stringify({ replicas: 2 }),
      headers: { "content-type": "application/json" },
    });
    assert.equal(scaled.status, 200, JSON.stringify(scaled.body));
    const badCount = await check("PATCH", "/v1/models/:model", "/v1/models/llama-3.1-8b", {
      body: JSON.stringify({ replicas: "two" }),
      headers: { "content-type": "application/json" },
    });
    assert.equal(badCount.status, 400);
    const noModel = await check("PATCH", "/v1/models/:model", "/v1/models/no-such-model", {
      body: JSON.stringify({ replicas: 1 }),
      headers: { "content-type": "application/json" },
    });
    assert.equal(noModel.status, 404);
    const badName = await check("PATCH", "/v1/models/:model", "/v1/models/-bad", {
      body: JSON.stringify({ replicas: 1 }),
      headers: { "content-type": "application/json" },
    });
    assert.equal(badName.status, 400);
    assert.match(badName.body.error.message, /model "-bad" must be 1 to 64 characters/);

    const json = { "content-type": "application/json" };
    for (const action of ["cordon", "uncordon", "drain"]) {
      const r = await check("POST", `/v1/nodes/:id/${action}`, `/v1/nodes/gpu-b1/${action}`, {
        body: JSON.stringify({ reason: "openapi test" }),
        headers: json,
      });
      assert.equal(r.status, 200, `${action}: ${JSON.stringify(r.body)}`);
    }
    for (const action of ["cordon", "uncordon", "clear"]) {
      const r = await check(
        "POST",
        `/v1/nodes/:id/gpus/:index/${action}`,
        `/v1/nodes/gpu-b1/gpus/3/${action}`,
        {
          body: JSON.stringify({ reason: "openapi test" }),
          headers: json,
        },
      );
      assert.equal(r.status, 200, `GPU ${action}: ${JSON.stringify(r.body)}`);
    }
    const gpu = "/v1/nodes/:id/gpus/:index/cordon";
    assert.equal(
      (await check("POST", gpu, "/v1/nodes/gpu-b1/gpus/99/cordon", { headers: json, body: "{}" })).status,
      404,
    );
    assert.equal(
      (await check("POST", gpu, "/v1/nodes/gpu-b1/gpus/x/cordon", { headers: json, body: "{}" })).status,
      400,
    );
    const cleared = await check("POST", "/v1/nodes/:id/problems/clear", "/v1/nodes/gpu-b1/problems/clear", {
      body: "{}",
      headers: json,
    });
    assert.equal(cleared.status, 200, JSON.stringify(cleared.body));
    // The catalog as it was before the apply, and its history.
    const was = await check("GET", "/v1/catalog", `/v1/catalog?at=${applied.body.seq - 1}`);
    assert.deepEqual(
      was.body.catalog.models.map((m: any) => m.name),
      ["llama-3.3-70b", "llama-3.1-405b"],
    );
    const history = await check("GET", "/v1/catalog/history", "/v1/catalog/history");
    const seqs = history.body.history.map((h: { seq: number }) => h.seq);
    assert.ok(seqs.includes(applied.body.seq), `the apply in the history: ${seqs}`);
    assert.equal(seqs.at(-1), scaled.body.seq, "the scale is the newest catalog");
    await check("GET", "/v1/rollouts", "/v1/rollouts");
    await check("GET", "/v1/rollouts/:model", "/v1/rollouts/llama-3.3-70b");
    assert.equal((await check("GET", "/v1/rollouts/:model", "/v1/rollouts/no-such-model")).status, 404);
    assert.equal((await check("GET", "/v1/rollouts/:model", "/v1/rollouts/-bad")).status, 400);
    for (const action of ["pause", "resume"]) {
      const r = await check("POST", `/v1/rollouts/:model/${action}`, `/v1/rollouts/llama-3.3-70b/${action}`, {
        body: JSON.stringify({ reason: "openapi test" }),
        headers: json,
      });
      assert.equal(r.status, 200, `${action}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.rollout.paused, action === "pause");
    }
    const undo = "/v1/rollouts/:model/undo";
    const undone = await check("POST", undo, "/v1/rollouts/llama-3.3-70b/undo", {
      body: "{}",
      headers: json,
    });
    assert.equal(undone.status, 200, JSON.stringify(undone.body));
    assert.equal(undone.body.fromSeq, was.body.seq);
    assert.equal(
      (await check("POST", undo, "/v1/rollouts/mixtral-8x22b/undo", { body: "{}", headers: json })).status,
      409,
    );
    const whatIf = await check("POST", "/v1/what-if", "/v1/what-if", {
      body: JSON.stringify({ config: { policy: "spread" } }),
      headers: json,
    });
    assert.equal(whatIf.status, 200, JSON.stringify(whatIf.body));
    const badWhatIf = await check("POST", "/v1/what-if", "/v1/what-if", {
      body: JSON.stringify({ config: { policy: "nope" } }),
      headers: json,
    });
    assert.equal(badWhatIf.status, 400);

    await check("GET", "/metrics", "/metrics");
    // No router given to this API: both lists empty (test/router/requests-api.test.ts reads a real one).
    const routerRequests = await check("GET", "/v1/router/requests", "/v1/router/requests");
    assert.deepEqual(routerRequests.body, { routers: [], replicas: [] });
    await check("GET", "/openapi.json", "/openapi.json", { token: null });
    const page = await check("GET", "/docs", "/docs", { token: null });
    for (const p of Object.keys(doc.paths)) assert.ok(page.body.includes(p), `the reference page lacks ${p}`);
    await checkStream("/v1/stream", "/v1/stream", "position");
    // Engine logs: gw-1 holds the nodes' sessions in this log; a stand-in for it answers on NATS as a gateway does.
    const subjects = new EngineLogSubjects(fx.log.subjects.prefix);
    const gw1 = fx.log.nc.subscribe(subjects.ask("gw-1"), {
      callback: (_e, m) => {
        const answer = (kind: string, data: string) => {
          const h = natsHeaders();
          h.set(REPLY_KIND_HEADER, kind);
          fx.log.nc.publish(m.reply!, data, { headers: h });
        };
        answer("accepted", "");
        answer("data", "engine says hi\n");
        answer("end", JSON.stringify({ end: "done", error: "" }));
      },
    });
    const logs = await check("GET", "/v1/logs/:id", "/v1/logs/r-70b-1?tail=5");
    assert.match(String(logs.body), /event: output\ndata: "engine says hi\\n"/);
    assert.match(String(logs.body), /event: end\ndata: \{"end":"done","error":""\}/);
    gw1.unsubscribe();
    assert.equal((await check("GET", "/v1/logs/:id", "/v1/logs/r-never")).status, 404);
    assert.equal((await check("GET", "/v1/logs/:id", "/v1/logs/r-70b-1?tail=-1")).status, 400);
    assert.equal((await check("GET", "/v1/logs/:id", "/v1/logs/r-70b-1")).status, 503, "no gateway answers");
    await checkStream(
      "/v1/endpoints",
      "/v1/endpoints?follow=true",
      "endpoints",
      "#/components/schemas/Endpoints",
    );

    const operations = Object.entries(doc.paths).flatMap(([p, ops]) =>
      Object.keys(ops as object).map((m) => `${m} ${p}`),
    );
    for (const op of operations) assert.ok(answered.has(op), `${op} was never called with success here`);
  });

  it("matches a routing table with rows and a replica serving at an endpoint", async () => {
    // A fleet decided by the real reconciler: one replica placed, running at an endpoint, then routed to.
    const f = new Fleet();
    f.connect("gpu-r1");
    f.catalog(llama70b(1));
    const start = f
      .settle()
      .flatMap((o) => o.commands)
      .find((c) => c.action.case === "start");
    assert.ok(start?.action.case === "start", "the reconciler started nothing");
    const { replicaId, shardId } = start.action.value;
    f.shard("gpu-r1", replicaId, shardId, ShardStatus_State.RUNNING, "", "http://10.0.0.5:8000");
    f.step();
    const routed = await startApiFixture(server.url);
    try {
      const last = await appendAll(
        routed.log,
        f.events.map((e) => e.event),
      );
      await routed.api.runtime.waitFor(last);
      const saved = fx;
      fx = routed;
      try {
        const table = await check("GET", "/v1/endpoints", "/v1/endpoints");
        assert.deepEqual(table.body.endpoints["llama-3.3-70b"], [
          { replicaId, url: "http://10.0.0.5:8000", nodeId: "gpu-r1" },
        ]);
        await check("GET", "/v1/endpoints", "/v1/endpoints?model=llama-3.3-70b");
        const r = await check("GET", "/v1/replicas/:id", `/v1/replicas/${replicaId}`);
        assert.equal(r.body.replica.shards[0].endpoint, "http://10.0.0.5:8000");
        await check("GET", "/v1/fleet", "/v1/fleet");
      } finally {
        fx = saved;
      }
    } finally {
      await routed.close();
    }
  });

  /**
   * A live stream never ends: its first event is read, checked (its data against
   * `schema` when the document gives the body one), then the request is dropped.
   */
  async function checkStream(template: string, path: string, event: string, schema?: string) {
    const op = doc.paths[template].get;
    const ctl = new AbortController();
    const res = await fetch(`${fx.api.url}${path}`, {
      headers: { authorization: `Bearer ${TOKEN}` },
      signal: ctl.signal,
    });
    assert.equal(res.status, 200);
    const type = (res.headers.get("content-type") ?? "").split(";")[0]!;
    assert.ok(op.responses["200"].content[type], `${path}: the stream's ${type} is not documented`);
    const reader = res.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    ctl.abort();
    const m = /^event: (\S+)\ndata: (.*)\n/.exec(first);
    assert.ok(m, `${path} sent ${JSON.stringify(first)}`);
    assert.equal(m[1], event);
    if (schema) {
      const validate = ajv.getSchema(`llmgw-api${schema}`)!;
      assert.ok(validate(JSON.parse(m[2]!)), `${path}: ${ajv.errorsText(validate.errors)}`);
    }
    answered.add(`get ${template}`);
  }
});
