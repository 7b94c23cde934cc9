import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { renameSync, writeFileSync } from "node:fs";
import { describe, it } from "node:test";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { codeOf, TestAgent } from "../support/agent.js";
import { serverCertificate } from "../support/certs.js";
import { eventually } from "../support/eventually.js";
import { type GatewayProcess, gatewayArgs, metricValue, rand, spawnGateway } from "../support/gateway.js";
import { h100Registration } from "../support/sample-events.js";
import { openTestLog, serverSuite } from "../support/suites.js";

/** Replaces a file the way rotations do: a new file renamed over the old one. */
function replace(path: string, contents: string): void {
  writeFileSync(`${path}.new`, contents);
  renameSync(`${path}.new`, path);
}

/** The agent's stream is still up and the gateway still takes and acknowledges what it says. */
async function assertStillServed(a: TestAgent, sessionId: string, when: string): Promise<void> {
  assert.equal(a.done, false, `the stream opened before ${when} ended`);
  a.heartbeat({ gpuMemoryUsedMb: [0n] });
  await a.waitForAck(a.shardStatus({ shardId: `s-${rand()}`, state: ShardStatus_State.RUNNING }), 10_000);
  assert.equal(a.sessionId, sessionId, `the session changed after ${when}`);
}

describe("gateway process: certificate files reloaded when they change", () => {
  const env = serverSuite();

  it("new handshakes get the new certificate and client CA, a bad pair keeps the old one, an open stream stays up", async () => {
    const { stream, prefix, close } = await openTestLog(env.server.url, "GWTLS");
    const certs = env.certs;
    let gw: GatewayProcess | undefined;
    const agents: TestAgent[] = [];
    try {
      gw = await spawnGateway(
        gatewayArgs({ nats: env.server.url, stream, prefix, revokedBucket: `revoked_${rand()}` }),
        certs,
      );
      const metrics = gw.metricsUrl;
      assert.ok(metrics, gw.output());
      const first = await serverCertificate(gw.url, certs.ca);
      assert.equal(first.fingerprint256, new X509Certificate(certs.server.cert).fingerprint256);

      const before = await TestAgent.connect({
        baseUrl: gw.url,
        tls: env.tls("gpu-tls-1"),
        registration: h100Registration("gpu-tls-1"),
      });
      agents.push(before);
      const sessionId = before.sessionId;

      // A rotation: a new key and certificate from the same CA.
      const next = certs.reissueServer();
      replace(gw.files.key, next.key);
      replace(gw.files.cert, next.cert);
      const nextFingerprint = new X509Certificate(next.cert).fingerprint256;
      assert.notEqual(nextFingerprint, first.fingerprint256);
      await eventually(
        async () => (await serverCertificate(gw!.url, certs.ca)).fingerprint256 === nextFingerprint,
        { what: "a new handshake presenting the new server certificate", timeoutMs: 15_000 },
      );
      assert.ok((await metricValue(metrics, "llmgw_gateway_tls_reloads_total", 'outcome="ok"')) >= 1);
      await assertStillServed(before, sessionId, "the certificate changed");

      // A key that does not match the certificate: refused, the rotated pair stays in use.
      replace(gw.files.key, certs.client("not-the-server").key);
      await eventually(
        async () => (await metricValue(metrics, "llmgw_gateway_tls_reloads_total", 'outcome="error"')) >= 1,
        { what: "the mismatched key counted as a failed reload", timeoutMs: 15_000 },
      );
      assert.match(gw.output(), /certificate files changed but cannot be used; keeping the old ones/);
      assert.equal((await serverCertificate(gw.url, certs.ca)).fingerprint256, nextFingerprint);
      agents.push(
        await TestAgent.connect({
          baseUrl: gw.url,
          tls: env.tls("gpu-tls-2"),
          registration: h100Registration("gpu-tls-2"),
        }),
      );
      replace(gw.files.key, next.key);

      // A new client CA: agents of the other CA get in, agents of the old one no longer do.
      replace(gw.files.ca, certs.otherCa);
      const foreign = { ca: certs.ca, ...certs.foreignClient("gpu-tls-3") };
      await eventually(
        async () => {
          const a = await TestAgent.connect(
            { baseUrl: gw!.url, tls: foreign, registration: h100Registration("gpu-tls-3") },
            5_000,
          );
          agents.push(a);
          return true;
        },
        { what: "an agent of the new client CA registering", timeoutMs: 15_000 },
      );
      const old = TestAgent.open({
        baseUrl: gw.url,
        tls: env.tls("gpu-tls-4"),
        registration: h100Registration("gpu-tls-4"),
      });
      agents.push(old);
      assert.equal(codeOf(await old.ended), "Unauthenticated");
      await assertStillServed(before, sessionId, "the client CA changed");
    } finally {
      for (const a of agents) a.abort();
      gw?.proc.kill("SIGKILL");
      await gw?.exited;
      await close();
    }
  });
});
