// biome-ignore-all lint/suspicious/noExplicitAny: response bodies are loosely typed JSON, checked by the assertions
/**
 * `llmgw api --tls-cert --tls-key`: a real API process serving HTTPS with a
 * certificate from a test CA, on a real nats-server. Clients that trust the
 * CA (the CLI with NODE_EXTRA_CA_CERTS, a raw HTTPS request) get answers;
 * plain HTTP gets none; a key that is not the certificate's, or half a
 * pair, is a usage error naming the flags.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type Log, openLog } from "../../src/log/index.js";
import { type NatsServer, startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { type Child, spawnLlmgw } from "../harness/proc.js";
import { makeTestCerts } from "../support/certs.js";
import { runCli } from "../support/cli.js";
import { appendAll, smallFleet } from "../support/operator-api.js";
import { listeningUrl, type RawRequest, rawRequest } from "../support/raw-http.js";

const TOKEN = "tls-test-token-6c1f0e9a4b7d2358e0a1c3f5b7d9e2f4";

/** A request over HTTPS trusting `ca`. */
const httpsCall = (url: string, path: string, ca: string, o: Omit<RawRequest, "ca"> = {}) =>
  rawRequest(url, path, { ...o, ca });

describe("the operator API over TLS (a real llmgw api process)", () => {
  const certs = makeTestCerts();
  const dir = tempDir("api-tls");
  const files = {
    ca: join(dir, "ca.pem"),
    cert: join(dir, "api.pem"),
    key: join(dir, "api-key.pem"),
    otherKey: join(dir, "other-key.pem"),
  };
  const stream = uniqueStream("APITLS");
  const prefix = `tapitls${Math.random().toString(36).slice(2, 8)}.evt`;
  let server: NatsServer & { close(): Promise<void> };
  let log: Log;
  const children: Child[] = [];
  const logFlags = () => ["--nats", server.url, "--stream", stream, "--subject-prefix", prefix];

  before(async () => {
    writeFileSync(files.ca, certs.ca);
    writeFileSync(files.cert, certs.server.cert);
    writeFileSync(files.key, certs.server.key);
    writeFileSync(files.otherKey, certs.reissueServer().key);
    server = await startServer();
    log = await openLog({ url: server.url, clientName: "test", name: stream, prefix });
    await appendAll(log, smallFleet());
  });
  after(async () => {
    await Promise.all(children.map((c) => c.stop()));
    await log?.jsm.streams.delete(log.stream).catch(() => {});
    await log?.close();
    await server?.close();
  });

  it("serves HTTPS with its certificate, listens on loopback by default, and the CLI works with the CA", async () => {
    const api = spawnLlmgw(
      ["api", ...logFlags(), "--listen", "127.0.0.1:0", "--tls-cert", files.cert, "--tls-key", files.key],
      { LLMGW_API_TOKEN: TOKEN },
    );
    children.push(api);
    const url = await listeningUrl(api);
    assert.match(url, /^https:\/\/127\.0\.0\.1:[1-9]\d*$/);
    const nodes = await httpsCall(url, "/v1/nodes", certs.ca, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    assert.equal(nodes.status, 200, JSON.stringify(nodes.body));
    assert.equal(nodes.body.nodes.length, 3);
    // Not trusted without the CA; plain HTTP gets no answer from the TLS port.
    await assert.rejects(httpsCall(url, "/healthz", certs.otherCa));
    await assert.rejects(fetch(url.replace("https:", "http:") + "/healthz"));
    const cli = await runCli(["nodes", "--api", url], {
      env: { LLMGW_API_TOKEN: TOKEN, NODE_EXTRA_CA_CERTS: files.ca },
    });
    assert.equal(cli.code, 0, cli.stderr);
    assert.match(cli.stdout, /gpu-a1/);
    const before = await log.lastSeq();
    const cordon = await runCli(["cordon", "gpu-b1", "--reason", "over TLS", "--api", url], {
      env: { LLMGW_API_TOKEN: TOKEN, NODE_EXTRA_CA_CERTS: files.ca },
    });
    assert.equal(cordon.code, 0, cordon.stderr);
    assert.equal(await log.lastSeq(), before + 1);
  });

  it("in development mode over TLS, takes its own https origin only", async () => {
    const api = spawnLlmgw([
      "api",
      "--dev",
      ...logFlags(),
      "--listen",
      "127.0.0.1:0",
      "--tls-cert",
      files.cert,
      "--tls-key",
      files.key,
    ]);
    children.push(api);
    const url = await listeningUrl(api);
    const host = new URL(url).host;
    const write = (origin: string) =>
      httpsCall(url, "/v1/nodes/gpu-a1/problems/clear", certs.ca, {
        method: "POST",
        headers: { origin, "content-type": "application/json" },
        body: "{}",
      });
    assert.equal((await write(`http://${host}`)).status, 403, "the http origin is another site");
    const own = await write(`https://${host}`);
    assert.notEqual(own.status, 403, JSON.stringify(own.body));
  });

  it("refuses half a pair, an unreadable file and a key that is not the certificate's", async () => {
    const cases: Array<[string[], RegExp]> = [
      [["--tls-cert", files.cert], /--tls-cert and --tls-key go together/],
      [["--tls-cert", join(dir, "missing.pem"), "--tls-key", files.key], /--tls-cert .*missing\.pem: ENOENT/],
      [["--tls-cert", files.cert, "--tls-key", files.otherKey], /cannot be used together/],
    ];
    for (const [args, why] of cases) {
      const r = await runCli(["api", ...logFlags(), "--listen", "127.0.0.1:0", ...args], {
        env: { LLMGW_API_TOKEN: TOKEN },
      });
      assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
      assert.match(r.stderr, why);
    }
  });
});
