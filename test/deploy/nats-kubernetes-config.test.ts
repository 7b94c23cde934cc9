/**
 * The NATS configuration deploy/kubernetes renders (the ConfigMap of the
 * StatefulSet nats) run by a real nats-server, with the Secret nats-auth
 * and a role's seed as `llmgw nats-auth kubernetes` renders them and a
 * server certificate where cert-manager puts it: no anonymous client gets
 * in, nor a client without TLS; a role's seed over TLS does. Only the
 * machine-specific values are replaced (the mount folder, the ports).
 */
import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { parseAllDocuments } from "yaml";
import { authenticatorFromCredentials } from "../../src/nats-auth/index.js";
import { natsServerBinary, tempDir } from "../harness/nats.js";
import { makeTestCerts } from "../support/certs.js";
import { runCli } from "../support/cli.js";

const ROOT = join(import.meta.dirname, "../..");

interface Obj {
  kind: string;
  metadata: { name: string };
  data?: Record<string, string>;
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", () => r()));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

describe("the rendered nats.conf in a real nats-server", () => {
  const dir = tempDir("nats-k8s");
  const certs = makeTestCerts();
  let proc: ChildProcess | undefined;
  let port = 0;
  let output = "";
  let gatewaySeed = "";

  before(async () => {
    const out = tempDir("render");
    execFileSync(join(ROOT, "scripts/render-deploy"), [out], { stdio: ["ignore", "ignore", "pipe"] });
    const objs = parseAllDocuments(readFileSync(join(out, "llmgw.yaml"), "utf8")).map((d) => d.toJS() as Obj);
    const conf = objs.find((o) => o.kind === "ConfigMap" && o.metadata.name.startsWith("nats-config"))
      ?.data?.["nats.conf"];
    assert.ok(conf, "no nats-config ConfigMap rendered");

    const r = await runCli(["nats-auth", "kubernetes", "--dir", join(dir, "keys")]);
    assert.equal(r.code, 0, r.stderr);
    const secrets = new Map(
      parseAllDocuments(r.stdout).map((d) => {
        const o = d.toJS() as Obj;
        return [o.metadata.name, o.data ?? {}] as const;
      }),
    );
    const b64 = (s: string | undefined) => Buffer.from(s ?? "", "base64").toString("utf8");
    gatewaySeed = b64(secrets.get("llmgw-nats-gateway")?.["gateway.nk"]);

    // Where the pod mounts them: /etc/nats/auth (Secret nats-auth), /etc/nats/tls (Secret nats-tls).
    const etc = join(dir, "etc");
    mkdirSync(join(etc, "auth"), { recursive: true });
    mkdirSync(join(etc, "tls"), { recursive: true });
    writeFileSync(join(etc, "auth", "auth.conf"), b64(secrets.get("nats-auth")?.["auth.conf"]));
    writeFileSync(join(etc, "tls", "tls.crt"), certs.server.cert);
    writeFileSync(join(etc, "tls", "tls.key"), certs.server.key);
    writeFileSync(join(etc, "tls", "ca.crt"), certs.ca);
    port = await freePort();
    const local = conf
      .replaceAll("/etc/nats/", `${etc}/`)
      .replace('"/var/run/nats/', `"${etc}/`)
      .replace('store_dir: "/data"', `store_dir: ${JSON.stringify(join(dir, "data"))}`)
      .replace(/^port: 4222$/m, `port: ${port}`)
      .replace(/^http_port: 8222$/m, `http_port: ${await freePort()}`)
      .replace(/^ {2}port: 6222$/m, `  port: ${await freePort()}`);
    assert.notEqual(local, conf);
    writeFileSync(join(etc, "nats.conf"), local);
    proc = spawn(natsServerBinary(), ["--config", join(etc, "nats.conf")], {
      env: { ...process.env, POD_NAME: "nats-0" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    proc.stdout?.on("data", (b) => (output += b));
    proc.stderr?.on("data", (b) => (output += b));
    const deadline = Date.now() + 20_000;
    while (!/Server is ready/.test(output)) {
      assert.equal(proc.exitCode, null, `nats-server exited:\n${output}`);
      assert.ok(Date.now() < deadline, `nats-server did not start:\n${output}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  });
  after(() => {
    proc?.kill("SIGKILL");
  });

  const tryConnect = async (o: { tls: boolean; seed?: string }): Promise<NatsConnection> =>
    connect({
      servers: `127.0.0.1:${port}`,
      reconnect: false,
      timeout: 5000,
      ...(o.tls ? { tls: { ca: certs.ca } } : {}),
      ...(o.seed ? { authenticator: authenticatorFromCredentials(o.seed) } : {}),
    });

  it("refuses an anonymous client", async () => {
    await assert.rejects(tryConnect({ tls: true }), /authorization|Authorization/);
  });

  it("refuses a client without TLS, even with a role's seed", async () => {
    await assert.rejects(tryConnect({ tls: false, seed: gatewaySeed }));
  });

  it("takes a role's seed over TLS", async () => {
    const nc = await tryConnect({ tls: true, seed: gatewaySeed });
    try {
      await nc.flush();
      assert.equal(nc.info?.tls_required, true);
    } finally {
      await nc.close();
    }
  });
});
