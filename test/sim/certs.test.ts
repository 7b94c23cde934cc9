import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { certsLayout, SimFleet } from "../../src/sim/index.js";
import { runCli } from "../support/cli.js";
import { FakeGateway, waitFor } from "../support/fake-gateway.js";
import { FAST, registered, statuses } from "../support/sim.js";

async function withTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "llmgw-certs-"));
  try {
    await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const cn = (cert: X509Certificate) => /^CN=(.*)$/m.exec(cert.subject)?.[1];
const load = async (path: string) => new X509Certificate(await readFile(path));

describe("llmgw certs", () => {
  it("creates a CA, a gateway certificate and node certificates (CN = node id), idempotently", () =>
    withTempDir(async (dir) => {
      const out = join(dir, "certs");
      const r = await runCli([
        "certs",
        "--out",
        out,
        "--nodes",
        "2",
        "--node-prefix",
        "gpu-",
        "--node",
        "edge-a",
        "--gateway-host",
        "gw.internal,10.0.0.7",
      ]);
      assert.equal(r.code, 0, r.stderr);
      const files = certsLayout(out);
      const ca = await load(files.ca);
      assert.equal(ca.ca, true);
      for (const id of ["gpu-1", "gpu-2", "edge-a"]) {
        const cert = await load(files.nodeCert(id));
        assert.equal(cn(cert), id);
        assert.ok(cert.checkIssued(ca), `${id} issued by the CA`);
        assert.ok(cert.verify(ca.publicKey), `${id} signed by the CA`);
        assert.match(cert.keyUsage?.join(",") ?? "", /1\.3\.6\.1\.5\.5\.7\.3\.2/); // clientAuth
        assert.equal(
          (await stat(files.nodeKey(id))).mode & 0o077,
          0,
          "private keys are not readable by others",
        );
      }
      const gateway = await load(files.gatewayCert);
      assert.ok(gateway.verify(ca.publicKey));
      for (const host of ["localhost", "gw.internal"]) assert.ok(gateway.checkHost(host), host);
      for (const ip of ["127.0.0.1", "10.0.0.7"]) assert.ok(gateway.checkIP(ip), ip);

      // Again: everything kept, byte for byte.
      const before = await readFile(files.nodeCert("gpu-1"), "utf8");
      const again = await runCli(["certs", "--out", out, "--nodes", "2", "--node-prefix", "gpu-"]);
      assert.equal(again.code, 0, again.stderr);
      assert.match(again.stdout, /CA\s+kept/);
      assert.match(again.stdout, /0 created, 2 kept/);
      assert.equal(await readFile(files.nodeCert("gpu-1"), "utf8"), before);

      // --force re-issues the leaves under the same CA.
      const caBefore = await readFile(files.ca, "utf8");
      const forced = await runCli([
        "certs",
        "--out",
        out,
        "--nodes",
        "1",
        "--node-prefix",
        "gpu-",
        "--force",
      ]);
      assert.equal(forced.code, 0, forced.stderr);
      assert.match(forced.stdout, /1 reissued/);
      assert.notEqual(await readFile(files.nodeCert("gpu-1"), "utf8"), before);
      assert.equal(await readFile(files.ca, "utf8"), caBefore);
      assert.ok((await load(files.nodeCert("gpu-1"))).verify(ca.publicKey));

      const bad = await runCli(["certs", "--out", out, "--node", "bad_id"]);
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /invalid --node.*bad_id.*must be a DNS name/);
    }));

  it("says how to install openssl when it is missing", () =>
    withTempDir(async (dir) => {
      const r = await runCli(["certs", "--out", dir], { env: { LLMGW_OPENSSL: join(dir, "no-openssl") } });
      assert.equal(r.code, 1);
      assert.match(r.stderr, /openssl was not found.*apt-get install openssl/);
    }));

  it("lets simulated agents connect over mutual TLS with those certificates", () =>
    withTempDir(async (dir) => {
      const r = await runCli(["certs", "--out", dir, "--nodes", "2"]);
      assert.equal(r.code, 0, r.stderr);
      const files = certsLayout(dir);
      const gw = await FakeGateway.start({
        key: await readFile(files.gatewayKey),
        cert: await readFile(files.gatewayCert),
        ca: await readFile(files.ca),
      });
      const fleet = new SimFleet({
        ...FAST,
        insecureDev: false,
        certsDir: dir,
        gateways: [gw.url],
        nodes: 2,
      });
      try {
        await fleet.start();
        for (const id of ["node-1", "node-2"]) {
          const s = await registered(gw, id);
          // What the gateway checks: the verified certificate's CN is the node id.
          assert.equal(s.peerCn, id);
        }
        const s = gw.latest("node-1")!;
        gw.command("node-1", {
          case: "start",
          value: { shardId: "sh-tls", replicaId: "r", gpuIndices: [0] },
        });
        await waitFor("RUNNING over TLS", () => statuses(s, "sh-tls").some((x) => x.state === State.RUNNING));
      } finally {
        await fleet.stop();
        await gw.close();
      }
    }));

  it("refuses to start a TLS fleet whose node certificate is missing, naming the file", () =>
    withTempDir(async (dir) => {
      const r = await runCli(["certs", "--out", dir, "--nodes", "1"]);
      assert.equal(r.code, 0, r.stderr);
      const fleet = new SimFleet({ certsDir: dir, nodes: 2 });
      await assert.rejects(fleet.start(), /nodes\/node-2\.pem.*llmgw certs/);
      await fleet.stop();
    }));
});
