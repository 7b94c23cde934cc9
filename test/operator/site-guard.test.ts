// biome-ignore-all lint/suspicious/noExplicitAny: response bodies are loosely typed JSON, checked by the assertions
/**
 * Development mode refuses other sites: a real `llmgw api --dev` process on
 * a real nats-server, asked the way a hostile page makes a browser ask
 * (DNS rebinding: a foreign `Host`; a cross-site POST: a foreign `Origin`,
 * no body or a form body). Each is refused and the log does not grow; the
 * API's own page, the CLI and a token-mode API work as before.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type Log, openLog } from "../../src/log/index.js";
import { siteCheck } from "../../src/operator/site-guard.js";
import { type NatsServer, startServer, uniqueStream } from "../harness/nats.js";
import { type Child, spawnLlmgw, until } from "../harness/proc.js";
import { logFlags, runCli } from "../support/cli.js";
import { appendAll, smallFleet, startApiFixture, TOKEN } from "../support/operator-api.js";
import { listeningUrl, rawRequest } from "../support/raw-http.js";

describe("development mode refuses other sites (a real llmgw api --dev)", () => {
  let server: NatsServer & { close(): Promise<void> };
  let log: Log;
  let api: Child;
  let url: string;
  let host: string;
  const stream = uniqueStream("SITE");
  const prefix = `tsite${Math.random().toString(36).slice(2, 8)}.evt`;

  before(async () => {
    server = await startServer();
    log = await openLog({ url: server.url, clientName: "test", name: stream, prefix });
    await appendAll(log, smallFleet());
    api = spawnLlmgw(["api", "--dev", "--listen", "127.0.0.1:0", ...logFlags(server.url, stream, prefix)]);
    url = await listeningUrl(api);
    host = new URL(url).host;
    const last = await log.lastSeq();
    await until(
      async () => ((await rawRequest(url, "/v1/nodes/gpu-a1")).status === 200 ? true : undefined),
      30_000,
      "the API to fold the seed",
    );
    assert.equal(await log.lastSeq(), last);
  });
  after(async () => {
    await api?.stop();
    await log?.jsm.streams.delete(log.stream).catch(() => {});
    await log?.close();
    await server?.close();
  });

  it("refuses a foreign Host (DNS rebinding), on reads and writes, with a message that says why", async () => {
    const before = await log.lastSeq();
    for (const h of [
      "evil.example",
      `evil.example:${new URL(url).port}`,
      "127.0.0.1.evil.example",
      "10.0.0.1",
    ]) {
      const read = await rawRequest(url, "/v1/fleet", { headers: { host: h } });
      assert.equal(read.status, 403, `${h}: ${JSON.stringify(read.body)}`);
      assert.equal(read.body.error.code, "forbidden");
      assert.match(read.body.error.message, /loopback host/);
      assert.ok(read.body.error.message.includes(JSON.stringify(h)), read.body.error.message);
      const write = await rawRequest(url, "/v1/nodes/gpu-a1/drain", {
        method: "POST",
        headers: { host: h, "content-type": "application/json" },
        body: JSON.stringify({ reason: "rebound" }),
      });
      assert.equal(write.status, 403, `${h}: ${JSON.stringify(write.body)}`);
    }
    assert.equal(await log.lastSeq(), before, "nothing appended");
    const node = await rawRequest(url, "/v1/nodes/gpu-a1");
    assert.equal(node.body.node.draining, false);
  });

  it("refuses a cross-origin POST, bodyless or not, and a form or text body without an Origin", async () => {
    const before = await log.lastSeq();
    const bodyless = await rawRequest(url, "/v1/nodes/gpu-a1/drain", {
      method: "POST",
      headers: { host, origin: "https://evil.example" },
    });
    assert.equal(bodyless.status, 403, JSON.stringify(bodyless.body));
    assert.match(
      bodyless.body.error.message,
      /Origin "https:\/\/evil\.example" is not http:\/\/127\.0\.0\.1:/,
    );
    const json = await rawRequest(url, "/v1/rollouts/llama-3.3-70b/undo", {
      method: "POST",
      headers: { host, origin: "http://evil.example", "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(json.status, 403, JSON.stringify(json.body));
    // Another port on this machine is another site.
    const otherPort = await rawRequest(url, "/v1/nodes/gpu-a1/cordon", {
      method: "POST",
      headers: { host, origin: "http://127.0.0.1:1", "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(otherPort.status, 403, JSON.stringify(otherPort.body));
    // A page's simple requests (no preflight) carry these types; some browsers omit Origin.
    for (const type of [
      undefined,
      "text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
    ]) {
      const r = await rawRequest(url, "/v1/nodes/gpu-a1/drain", {
        method: "POST",
        headers: { host, ...(type ? { "content-type": type } : {}) },
        ...(type ? { body: "reason=x" } : {}),
      });
      assert.equal(r.status, 415, `${type}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error.code, "unsupported-media-type");
      assert.match(r.body.error.message, /Content-Type: application\/json/);
    }
    assert.equal(await log.lastSeq(), before, "nothing appended");
    const node = await rawRequest(url, "/v1/nodes/gpu-a1");
    assert.equal(node.body.node.draining, false);
    assert.equal(node.body.node.cordoned, false);
  });

  it("serves its own page: loopback names, its own Origin, JSON writes; the CLI works", async () => {
    const port = new URL(url).port;
    for (const h of [host, `localhost:${port}`, "127.0.0.2", `[::1]:${port}`]) {
      const r = await rawRequest(url, "/v1/nodes", { headers: { host: h } });
      assert.equal(r.status, 200, `${h}: ${JSON.stringify(r.body)}`);
    }
    const page = await rawRequest(url, "/", { headers: { host } });
    assert.equal(page.status, 200);
    const before = await log.lastSeq();
    const cordon = await rawRequest(url, "/v1/nodes/gpu-b1/cordon", {
      method: "POST",
      headers: { host, origin: `http://${host}`, "content-type": "application/json" },
      body: JSON.stringify({ reason: "from the page" }),
    });
    assert.equal(cordon.status, 200, JSON.stringify(cordon.body));
    assert.ok(cordon.body.seq > before);
    const cli = await runCli(["uncordon", "gpu-b1", "--api", url]);
    assert.equal(cli.code, 0, cli.stderr);
    assert.equal(await log.lastSeq(), cordon.body.seq + 1);
  });
});

describe("with a token, any Host and Origin as before", () => {
  let server: NatsServer & { close(): Promise<void> };
  let fx: Awaited<ReturnType<typeof startApiFixture>>;
  before(async () => {
    server = await startServer();
    fx = await startApiFixture(server.url);
    await fx.api.runtime.waitFor(await appendAll(fx.log, smallFleet()));
  });
  after(async () => {
    await fx?.close();
    await server?.close();
  });
  it("answers a request named for another host from another origin (the token is what counts)", async () => {
    const r = await rawRequest(fx.api.url, "/v1/nodes/gpu-a1/cordon", {
      method: "POST",
      headers: {
        host: "api.fleet.example",
        origin: "https://ops.example",
        authorization: `Bearer ${TOKEN}`,
        "content-type": "application/json",
      },
      body: "{}",
    });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const anon = await rawRequest(fx.api.url, "/v1/nodes", { headers: { host: "api.fleet.example" } });
    assert.equal(anon.status, 401);
  });
});

describe("the site check itself", () => {
  const req = (
    headers: Record<string, string>,
    method = "GET",
    routeUrl: string | undefined = "/v1/catalog",
  ) => ({
    method,
    headers,
    routeUrl,
  });
  it("takes loopback names with or without a port, and nothing else", () => {
    for (const host of ["localhost", "LOCALHOST:80", "127.0.0.1:8080", "127.255.0.9", "[::1]", "[::1]:8080"])
      assert.equal(siteCheck(req({ host }), "http"), undefined, host);
    for (const host of [
      "",
      "evil.example",
      "localhost.evil.example",
      "127.0.0.1.nip.io:80",
      "[::2]:80",
      "0.0.0.0",
    ])
      assert.equal(siteCheck(req({ host }), "http")?.status, 403, host);
  });
  it("compares the Origin with the scheme it serves", () => {
    const host = "127.0.0.1:8443";
    assert.equal(siteCheck(req({ host, origin: "https://127.0.0.1:8443" }), "https"), undefined);
    assert.equal(siteCheck(req({ host, origin: "http://127.0.0.1:8443" }), "https")?.status, 403);
    assert.equal(siteCheck(req({ host, origin: "null" }), "https")?.status, 403);
  });
  it("takes YAML only where the catalog is written", () => {
    const host = "localhost";
    const yaml = { host, "content-type": "application/yaml" };
    assert.equal(siteCheck(req(yaml, "PUT", "/v1/catalog"), "http"), undefined);
    assert.equal(siteCheck(req(yaml, "POST", "/v1/nodes/:id/drain"), "http")?.status, 415);
    assert.equal(
      siteCheck(
        req({ host, "content-type": "application/json; charset=utf-8" }, "DELETE", undefined),
        "http",
      ),
      undefined,
    );
    assert.equal(
      siteCheck(req({ host, "content-type": "text/plain" }, "PATCH", "/v1/models/:model"), "http")?.status,
      415,
    );
  });
});
