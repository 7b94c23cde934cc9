/**
 * TLS to NATS (`--nats-ca`, `--nats-cert`, `--nats-key`) against a real
 * nats-server that requires TLS with client certificates and the role users
 * of `llmgw nats-auth init`: the reader's credentials over TLS read the
 * log; without the client certificate or the CA the connection fails; bad
 * TLS flags are usage errors naming the flag.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { isLogError, type Log, openLog } from "../../src/log/index.js";
import type { NatsSecurity } from "../../src/nats-auth/index.js";
import { startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { makeTestCerts } from "../support/certs.js";
import { runCli } from "../support/cli.js";
import { rand } from "../support/gateway.js";
import { credsFile, natsAuthInit, roleAuthenticator } from "../support/nats-auth.js";

describe("TLS to NATS with role credentials (real nats-server requiring client certificates)", () => {
  const stream = uniqueStream("TLS");
  const prefix = `tls${rand()}.evt`;
  const dir = tempDir("nats-tls");
  const certs = makeTestCerts();
  const files = {
    ca: join(dir, "ca.pem"),
    serverCert: join(dir, "server.pem"),
    serverKey: join(dir, "server-key.pem"),
    clientCert: join(dir, "client.pem"),
    clientKey: join(dir, "client-key.pem"),
  };
  const client = certs.client("llmgw-reader");
  const creds = (role: string) => credsFile(dir, role);
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  let apiLog: Log | undefined;
  const security = (role: string): NatsSecurity => ({
    authenticator: roleAuthenticator(dir, role),
    tls: { ca: certs.ca, cert: client.cert, key: client.key },
  });

  before(async () => {
    writeFileSync(files.ca, certs.ca);
    writeFileSync(files.serverCert, certs.server.cert);
    writeFileSync(files.serverKey, certs.server.key);
    writeFileSync(files.clientCert, client.cert);
    writeFileSync(files.clientKey, client.key);
    await natsAuthInit(dir, stream, prefix);
    const conf = join(dir, "tls.conf");
    writeFileSync(
      conf,
      [
        'include "auth.conf"',
        `tls { cert_file: ${JSON.stringify(files.serverCert)}, key_file: ${JSON.stringify(files.serverKey)}, ca_file: ${JSON.stringify(files.ca)}, verify: true }`,
        "",
      ].join("\n"),
    );
    server = await startServer({ include: conf, probe: security("reader") });
    // The API's credentials create the stream, over TLS too.
    apiLog = await openLog({
      url: server.url,
      clientName: "test api",
      name: stream,
      prefix,
      security: security("api"),
    });
  });

  after(async () => {
    await apiLog?.close();
    await server?.close();
  });

  it("reads the log with the reader's credentials over TLS", async () => {
    const flags = ["--nats", server?.url ?? "", "--stream", stream, "--subject-prefix", prefix];
    const tls = ["--nats-ca", files.ca, "--nats-cert", files.clientCert, "--nats-key", files.clientKey];
    const ok = await runCli(["check-log", ...flags, "--nats-creds", creds("reader"), ...tls]);
    assert.equal(ok.code, 0, `${ok.stdout}\n${ok.stderr}`);
    // The same through the environment.
    const viaEnv = await runCli(["events", ...flags], {
      env: {
        LLMGW_NATS_CREDS: creds("reader"),
        LLMGW_NATS_CA: files.ca,
        LLMGW_NATS_CERT: files.clientCert,
        LLMGW_NATS_KEY: files.clientKey,
      },
    });
    assert.equal(viaEnv.code, 0, viaEnv.stderr);
  });

  it("fails without the client certificate or without the CA", async () => {
    const url = server?.url ?? "";
    const reader = security("reader");
    const base = { url, clientName: "test tls", name: stream, prefix, ensure: false } as const;
    await assert.rejects(
      openLog({ ...base, security: { ...reader, tls: { ca: certs.ca } } }),
      (err) => isLogError(err, "unavailable"),
      "no client certificate",
    );
    await assert.rejects(
      openLog({ ...base, security: { ...reader, tls: { cert: client.cert, key: client.key } } }),
      (err) => isLogError(err, "unavailable") && /certificate/i.test(err.message),
      "the server's certificate not trusted",
    );
  });

  it("names the flag of a bad TLS file, and a certificate without its key", async () => {
    const flags = ["--nats", server?.url ?? "", "--stream", stream, "--nats-creds", creds("reader")];
    const notPem = join(dir, "not.pem");
    writeFileSync(notPem, "hello\n");
    for (const [args, why] of [
      [["--nats-ca", notPem], `--nats-ca ${notPem}: not a PEM file`],
      [["--nats-ca", join(dir, "missing.pem")], `--nats-ca ${join(dir, "missing.pem")}`],
      [["--nats-cert", files.clientCert], "--nats-cert and --nats-key go together"],
    ] as const) {
      const r = await runCli(["events", ...flags, ...args]);
      assert.equal(r.code, 2, r.stderr);
      assert.ok(r.stderr.includes(why), r.stderr);
    }
  });
});
