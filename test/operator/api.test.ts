// biome-ignore-all lint/suspicious/noExplicitAny: response bodies are loosely typed JSON, checked by the assertions
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { startApi } from "../../src/operator/index.js";
import { type NatsServer, startServer } from "../harness/nats.js";
import { decide, EventFactory } from "../support/fleet-events.js";
import {
  type ApiFixture,
  appendAll,
  eventually,
  smallFleet,
  startApiFixture,
} from "../support/operator-api.js";

const example = readFileSync(new URL("../../examples/catalog.yaml", import.meta.url), "utf8");
const yaml = { "content-type": "application/yaml" };

describe("operator API against a real nats-server", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  async function withApi(
    fn: (fx: ApiFixture) => Promise<void>,
    opts?: Parameters<typeof startApiFixture>[1],
  ) {
    const fx = await startApiFixture(server.url, opts);
    try {
      await fn(fx);
    } finally {
      await fx.close();
    }
  }

  /** Appends the small fleet and waits until the API has folded it. */
  async function seeded(fx: ApiFixture) {
    const last = await appendAll(fx.log, smallFleet());
    await fx.api.runtime.waitFor(last);
    return last;
  }

  it("serves health, readiness and metrics", () =>
    withApi(async (fx) => {
      const h = await fx.call("/healthz", { token: null });
      assert.equal(h.status, 200);
      assert.deepEqual(h.body, { status: "ok" });
      const last = await appendAll(fx.log, smallFleet());
      const r = await eventually(async () => {
        const res = await fx.call("/readyz", { token: null });
        return res.status === 200 && res.body.seq === last ? res : undefined;
      }, "readyz at the last sequence");
      assert.equal(r.body.status, "ready");
      await fx.call("/v1/nodes");
      const m = await fx.call("/metrics");
      assert.equal(m.status, 200);
      assert.match(m.body, /llmgw_projection_last_seq\{projection="fleet"\} \d+/);
      assert.match(m.body, /llmgw_api_requests_total\{method="GET",route="\/v1\/nodes",status="200"\} 1/);
    }));

  it("reports not ready with the reason when the projection has stopped", () =>
    withApi(async (fx) => {
      await fx.api.runtime.stop();
      const r = await fx.call("/readyz", { token: null });
      assert.equal(r.status, 503);
      assert.equal(r.body.error.code, "not-ready");
      assert.match(r.body.error.message, /projection is stopped/);
    }));

  it("requires the bearer token: missing and wrong are refused with a JSON 401", () =>
    withApi(async (fx) => {
      const missing = await fx.call("/v1/nodes", { token: null });
      assert.equal(missing.status, 401);
      assert.equal(missing.body.error.code, "unauthorized");
      assert.match(missing.body.error.message, /missing Authorization/);
      assert.match(missing.headers.get("www-authenticate") ?? "", /^Bearer/);
      const wrong = await fx.call("/v1/nodes", { token: "not-the-token" });
      assert.equal(wrong.status, 401);
      assert.equal(wrong.body.error.message, "invalid token");
      const basic = await fx.call("/v1/catalog", { token: null, headers: { authorization: "Basic eDp5" } });
      assert.equal(basic.status, 401);
      const put = await fx.call("/v1/catalog", { method: "PUT", token: null, headers: yaml, body: example });
      assert.equal(put.status, 401);
      assert.equal((await fx.call("/v1/catalog")).body.seq, 0, "a refused PUT wrote nothing");
      const metrics = await fx.call("/metrics", { token: null });
      assert.equal(metrics.status, 401);
      assert.equal((await fx.call("/v1/nodes")).status, 200);
    }));

  it("in development mode on loopback needs no token", () =>
    withApi(
      async (fx) => {
        const r = await fx.call("/v1/nodes", { token: null });
        assert.equal(r.status, 200);
        assert.deepEqual(r.body.nodes, []);
      },
      { auth: { kind: "dev" } },
    ));

  it("refuses development mode on a non-loopback address", async () => {
    await assert.rejects(
      startApi({ log: undefined as never, host: "0.0.0.0", port: 0, auth: { kind: "dev" } }),
      /loopback only/,
    );
  });

  it("lists nodes and shows one with its GPUs and replicas; unknown is 404, invalid is 400", () =>
    withApi(async (fx) => {
      await seeded(fx);
      const list = await fx.call("/v1/nodes");
      assert.equal(list.status, 200);
      assert.deepEqual(
        list.body.nodes.map((n: any) => [n.nodeId, n.liveness, n.gpusUsed, n.gpusTotal]),
        [
          ["gpu-a1", "connected", 8, 8],
          ["gpu-a2", "connected", 8, 8],
          ["gpu-b1", "connected", 4, 8],
        ],
      );
      const one = await fx.call("/v1/nodes/gpu-b1");
      assert.equal(one.status, 200);
      assert.deepEqual(one.body.node.replicaIds, ["r-70b-1"]);
      assert.equal(one.body.node.gpus[0].shards[0].replicaId, "r-70b-1");
      assert.deepEqual(one.body.node.gpus[4].shards, []);
      const unknown = await fx.call("/v1/nodes/gpu-zz");
      assert.equal(unknown.status, 404);
      assert.deepEqual(unknown.body, { error: { code: "not-found", message: "node gpu-zz not found" } });
      const bad = await fx.call("/v1/nodes/gpu_a1");
      assert.equal(bad.status, 400);
      assert.equal(bad.body.error.code, "invalid-argument");
      const noRoute = await fx.call("/v1/nope");
      assert.equal(noRoute.status, 404);
      assert.equal(noRoute.body.error.code, "not-found");
    }));

  it("cordon, uncordon and drain append operator events and show in /v1/nodes/:id", () =>
    withApi(async (fx) => {
      await seeded(fx);
      const c = await fx.call("/v1/nodes/gpu-a1/cordon", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ reason: "firmware update" }),
      });
      assert.equal(c.status, 200);
      assert.equal(c.body.node.cordoned, true);
      assert.equal(c.body.node.cordonReason, "firmware update");
      // Read your writes: the next GET sees it.
      const after1 = await fx.call("/v1/nodes/gpu-a1");
      assert.equal(after1.body.node.cordoned, true);

      const u = await fx.call("/v1/nodes/gpu-a1/uncordon", { method: "POST" });
      assert.equal(u.status, 200);
      assert.equal((await fx.call("/v1/nodes/gpu-a1")).body.node.cordoned, false);

      const d = await fx.call("/v1/nodes/gpu-a2/drain", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ reason: "RMA" }),
      });
      assert.equal(d.status, 200);
      const a2 = (await fx.call("/v1/nodes/gpu-a2")).body.node;
      assert.equal(a2.draining, true);
      assert.equal(a2.cordoned, true);
      assert.equal(a2.cordonReason, "RMA");

      const ev = await fx.call("/v1/events?subject=operator.*");
      assert.deepEqual(
        ev.body.events.map((e: any) => Object.keys(e.event).find((k) => k.startsWith("node"))),
        ["nodeCordoned", "nodeUncordoned", "nodeDrainRequested"],
      );
      const first = ev.body.events[0];
      assert.equal(first.subject, `${fx.log.subjects.prefix}.operator.gpu-a1`);
      assert.deepEqual(first.event.nodeCordoned, {
        nodeId: "gpu-a1",
        reason: "firmware update",
        operator: "admin",
      });
      assert.deepEqual(first.event.writer, { kind: "KIND_OPERATOR", id: "api-test" });
      assert.equal(c.body.seq, first.seq);

      const unknown = await fx.call("/v1/nodes/gpu-zz/drain", { method: "POST" });
      assert.equal(unknown.status, 404);
      const invalidId = await fx.call("/v1/nodes/a%20b/cordon", { method: "POST" });
      assert.equal(invalidId.status, 400);
      const badBody = await fx.call("/v1/nodes/gpu-a1/cordon", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ reason: 5, extra: true }),
      });
      assert.equal(badBody.status, 400);
      assert.deepEqual(
        badBody.body.error.issues.map((i: any) => i.path),
        ["reason", ""],
      );
      const brokenJson = await fx.call("/v1/nodes/gpu-a1/cordon", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{",
      });
      assert.equal(brokenJson.status, 400);
      assert.equal(brokenJson.body.error.code, "invalid-argument");
      const count = (await fx.call("/v1/events?subject=operator.>")).body.events.length;
      assert.equal(count, 3, "refused requests wrote nothing");
    }));

  it("lists replicas, shows one, explains it from the reconciler's passes", () =>
    withApi(async (fx) => {
      await seeded(fx);
      const list = await fx.call("/v1/replicas");
      assert.deepEqual(
        list.body.replicas.map((r: any) => [r.replicaId, r.model, r.phase, r.nodeIds.join("+")]),
        [
          ["r-405b-1", "llama-3.1-405b", "placed", "gpu-a1+gpu-a2"],
          ["r-70b-1", "llama-3.3-70b", "running", "gpu-b1"],
          ["r-70b-2", "llama-3.3-70b", "pending", ""],
        ],
      );
      const filtered = await fx.call("/v1/replicas?phase=pending");
      assert.deepEqual(
        filtered.body.replicas.map((r: any) => r.replicaId),
        ["r-70b-2"],
      );
      assert.equal((await fx.call("/v1/replicas?phase=lost")).status, 400);
      const one = await fx.call("/v1/replicas/r-70b-2");
      assert.equal(one.body.replica.pendingReason, "0/3 nodes fit: 3 too few free GPUs");
      assert.equal((await fx.call("/v1/replicas/r-nope")).status, 404);
      assert.equal((await fx.call("/v1/replicas/bad%20id")).status, 400);

      const ex = await fx.call("/v1/replicas/r-405b-1/explain");
      assert.equal(ex.status, 200);
      assert.deepEqual(
        ex.body.decisions.map((d: any) => d.kind),
        ["replicaCreated", "replicaPlaced"],
      );
      assert.equal(ex.body.decisions[1].text, "placed r-405b-1 on gpu-a1+gpu-a2 (binpack)");
      assert.equal(ex.body.decisions[1].leaderId, "rec-1");

      // A removed replica is no longer in the state, but its story is still in the log.
      const f = new EventFactory("later");
      const last = (await fx.log.append(f.pass([decide.removed("r-70b-2", "llama-3.3-70b")]))).seq;
      await fx.api.runtime.waitFor(last);
      assert.equal((await fx.call("/v1/replicas/r-70b-2")).status, 404);
      const gone = await fx.call("/v1/replicas/r-70b-2/explain");
      assert.equal(gone.status, 200);
      assert.equal(gone.body.replica, null);
      assert.deepEqual(
        gone.body.decisions.map((d: any) => d.kind),
        ["replicaCreated", "replicaPending", "replicaRemoved"],
      );
      assert.equal((await fx.call("/v1/replicas/r-never/explain")).status, 404);
    }));

  it("pages through the events, filters by subject, validates the query", () =>
    withApi(async (fx) => {
      const last = await seeded(fx);
      const seen: number[] = [];
      let after = 0;
      for (let page = 0; page < 10; page++) {
        const r = await fx.call(`/v1/events?after=${after}&limit=3`);
        assert.equal(r.status, 200);
        assert.equal(r.body.lastSeq, last);
        seen.push(...r.body.events.map((e: any) => e.seq));
        if (r.body.next === null) break;
        after = r.body.next;
      }
      assert.deepEqual(
        seen,
        Array.from({ length: last }, (_, i) => i + 1),
      );
      const firstPage = await fx.call("/v1/events?limit=2");
      assert.equal(firstPage.body.next, 2);
      assert.equal(firstPage.body.events[0].event.gatewayStarted.gatewayId, "gw-1");
      // int64 fields are strings in protobuf JSON.
      assert.equal(typeof firstPage.body.events[0].event.timeUnixMs, "string");

      const sessions = await fx.call("/v1/events?subject=session.*");
      assert.deepEqual(
        sessions.body.events.map((e: any) => e.event.sessionOpened.nodeId),
        ["gpu-a1", "gpu-a2", "gpu-b1"],
      );
      assert.equal(sessions.body.next, null);
      const full = await fx.call(`/v1/events?subject=${fx.log.subjects.catalog}`);
      assert.equal(full.body.events.length, 1);
      const past = await fx.call(`/v1/events?after=${last}`);
      assert.deepEqual(past.body.events, []);
      assert.equal(past.body.next, null);

      const bad = await fx.call("/v1/events?after=-1&limit=5000&subject=a..b&bogus=1");
      assert.equal(bad.status, 400);
      assert.equal(bad.body.error.code, "invalid-argument");
      assert.deepEqual(bad.body.error.issues.map((i: any) => i.path).sort(), [
        "",
        "after",
        "limit",
        "subject[0]",
      ]);
      assert.equal((await fx.call("/v1/events?limit=abc")).status, 400);
    }));

  it("replays the fleet at any sequence", () =>
    withApi(async (fx) => {
      const last = await seeded(fx);
      const at3 = await fx.call("/v1/fleet?at=3");
      assert.equal(at3.body.seq, 3);
      assert.deepEqual(
        at3.body.nodes.map((n: any) => n.nodeId),
        ["gpu-a1", "gpu-a2"],
      );
      assert.deepEqual(at3.body.replicas, []);
      const now = await fx.call("/v1/fleet");
      assert.equal(now.body.seq, last);
      assert.equal(now.body.replicas.length, 3);
      assert.equal((await fx.call("/v1/fleet?at=x")).status, 400);
      const page = await fx.call("/", { token: null });
      assert.equal(page.status, 200);
      assert.match(page.headers.get("content-type") ?? "", /text\/html/);
      assert.match(page.body, /llmgw/);
    }));

  it("applies a catalog (YAML or JSON) and serves it with its sequence as ETag", () =>
    withApi(async (fx) => {
      const empty = await fx.call("/v1/catalog");
      assert.equal(empty.status, 200);
      assert.equal(empty.body.seq, 0);
      assert.equal(empty.headers.get("etag"), '"0"');
      assert.deepEqual(empty.body.catalog, { models: [] });

      const put = await fx.call("/v1/catalog", {
        method: "PUT",
        headers: yaml,
        body: example,
      });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      assert.equal(put.headers.get("etag"), `"${put.body.seq}"`);
      assert.deepEqual(
        put.body.models.map((m: any) => `${m.name}×${m.replicas}`),
        ["llama-3.1-8b×4", "llama-3.3-70b×4", "mixtral-8x22b×1", "llama-3.1-405b×1"],
      );
      const got = await fx.call("/v1/catalog");
      assert.equal(got.body.seq, put.body.seq);
      assert.equal(got.body.appliedBy, "admin", "--token is recorded as admin");
      assert.equal(got.headers.get("etag"), `"${put.body.seq}"`);
      const b405 = got.body.catalog.models[3];
      assert.equal(b405.profiles[0].memoryPerGpu, "72GiB");
      assert.equal(b405.profiles[0].fabricKind, "infiniband");
      assert.equal(b405.profiles[0].shards, 2);

      // GET, edit, PUT round-trips (as JSON this time) with If-Match.
      const edited = structuredClone(got.body.catalog);
      edited.models[0].replicas = 2;
      const put2 = await fx.call("/v1/catalog", {
        method: "PUT",
        headers: { "content-type": "application/json", "if-match": got.headers.get("etag") ?? "" },
        body: JSON.stringify(edited),
      });
      assert.equal(put2.status, 200, JSON.stringify(put2.body));
      const got2 = await fx.call("/v1/catalog");
      assert.equal(got2.body.seq, put2.body.seq);
      assert.equal(got2.body.catalog.models[0].replicas, 2);
      assert.deepEqual(got2.body.catalog.models.slice(1), got.body.catalog.models.slice(1));

      const ev = await fx.call("/v1/events?subject=catalog");
      const change = ev.body.events[0].event.catalogChanged;
      assert.equal(change.catalog.models[3].profiles[0].memoryPerGpuMb, String(72 * 1024));
      assert.equal(change.appliedBy, "admin");

      const emptyCatalog = await fx.call("/v1/catalog", {
        method: "PUT",
        headers: yaml,
        body: "models: []\n",
      });
      assert.equal(emptyCatalog.status, 200);
      assert.deepEqual((await fx.call("/v1/catalog")).body.catalog, { models: [] });
    }));

  it("refuses an invalid catalog reporting every invalid field, and writes nothing", () =>
    withApi(async (fx) => {
      const several = [
        "models:",
        "  - name: llama 70b", // bad name
        "    replicas: -1", // negative
        "    profiles:",
        "      - name: tp8",
        "        shards: 2", // multi-shard without fabricKind
        '        gpusPerShard: "8"', // wrong type
        "        memoryPerGpu: 80GB", // ambiguous unit
        "        colour: blue", // unknown field
        "      - name: tp8", // duplicate profile
        "        gpusPerShard: 8",
        "        memoryPerGpu: 72GiB",
        "  - name: mixtral",
        "    replicas: 1", // replicas without profiles
        "  - name: mixtral", // duplicate model
        "    replicas: 0",
      ].join("\n");
      const r = await fx.call("/v1/catalog", { method: "PUT", headers: yaml, body: several });
      assert.equal(r.status, 400);
      assert.equal(r.body.error.code, "invalid-catalog");
      const byPath = Object.fromEntries(r.body.error.issues.map((i: any) => [i.path, i.message]));
      assert.deepEqual(Object.keys(byPath).sort(), [
        "models[0].name",
        "models[0].profiles[0].colour",
        "models[0].profiles[0].fabricKind",
        "models[0].profiles[0].gpusPerShard",
        "models[0].profiles[0].memoryPerGpu",
        "models[0].profiles[1].name",
        "models[0].replicas",
        "models[1].profiles",
        "models[2].name",
      ]);
      assert.match(r.body.error.message, /9 invalid fields/);
      assert.match(byPath["models[0].profiles[0].gpusPerShard"], /expected number, received string/);
      assert.match(byPath["models[0].profiles[0].fabricKind"], /2 shards .* needs a fabricKind/);
      assert.match(byPath["models[0].profiles[1].name"], /duplicate profile name "tp8"/);
      assert.match(byPath["models[2].name"], /duplicate model name "mixtral"/);
      assert.match(byPath["models[0].profiles[0].memoryPerGpu"], /binary unit/);

      const syntax = await fx.call("/v1/catalog", {
        method: "PUT",
        headers: yaml,
        body: "models:\n  - name: a\n   replicas: 1\n",
      });
      assert.equal(syntax.status, 400);
      assert.equal(syntax.body.error.code, "invalid-catalog");
      assert.match(syntax.body.error.issues[0].message, /^invalid YAML: .* at line \d+, column \d+/);

      const json = await fx.call("/v1/catalog", {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: '{"models": [',
      });
      assert.equal(json.status, 400);
      assert.match(json.body.error.issues[0].message, /^invalid JSON/);

      const types = await fx.call("/v1/catalog", {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ models: [{ name: 7, replicas: "two", profiles: {} }] }),
      });
      assert.equal(types.status, 400);
      assert.deepEqual(
        types.body.error.issues.map((i: any) => i.path),
        ["models[0].name", "models[0].replicas", "models[0].profiles"],
      );
      const missing = await fx.call("/v1/catalog", { method: "PUT", headers: yaml, body: "{}" });
      assert.deepEqual(missing.body.error.issues, [{ path: "models", message: "required" }]);

      const media = await fx.call("/v1/catalog", {
        method: "PUT",
        headers: { "content-type": "text/csv" },
        body: "a,b",
      });
      assert.equal(media.status, 415);
      assert.equal(media.body.error.code, "unsupported-media-type");
      const badIfMatch = await fx.call("/v1/catalog", {
        method: "PUT",
        headers: { ...yaml, "if-match": "yesterday" },
        body: example,
      });
      assert.equal(badIfMatch.status, 400);

      assert.deepEqual((await fx.call("/v1/events?subject=catalog")).body.events, []);
    }));

  it("of two PUTs with the same If-Match one wins and the other gets 412", () =>
    withApi(async (fx) => {
      const first = await fx.call("/v1/catalog", { method: "PUT", headers: yaml, body: example });
      const etag = first.headers.get("etag") ?? "";
      const variant = (n: number) => example.replace("replicas: 4", `replicas: ${n}`);
      const [a, b] = await Promise.all(
        [1, 2].map((n) =>
          fx.call("/v1/catalog", { method: "PUT", headers: { ...yaml, "if-match": etag }, body: variant(n) }),
        ),
      );
      assert.deepEqual([a?.status, b?.status].sort(), [200, 412]);
      const [won, lost] = a?.status === 200 ? [a, b] : [b, a];
      assert.equal(lost?.body.error.code, "precondition-failed");
      assert.match(lost?.body.error.message, /the catalog changed/);
      assert.equal(lost?.body.error.seq, won?.body.seq);
      const now = await fx.call("/v1/catalog");
      assert.equal(now.body.seq, won?.body.seq);
      assert.equal((await fx.call("/v1/events?subject=catalog")).body.events.length, 2);
      // A stale If-Match is refused outright.
      const stale = await fx.call("/v1/catalog", {
        method: "PUT",
        headers: { ...yaml, "if-match": etag },
        body: example,
      });
      assert.equal(stale.status, 412);
    }));
});
