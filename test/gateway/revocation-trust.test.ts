/**
 * Revocation holds what it says and fails closed, through real gateway
 * processes on a real nats-server:
 * - an entry applies only when its value parses and names the key's CN or
 *   serial: a stray or mismatched value keeps nobody out (and replacing a
 *   revocation with one lifts it), each counted and logged;
 * - a gateway that cannot read its revocation bucket (its NATS user may not)
 *   refuses new sessions with Unavailable, says so in a metric and a log
 *   line, and admits them once the bucket can be read.
 */
import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { Kvm } from "@nats-io/kv";
import { connectNats } from "../../src/log/index.js";
import { startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { codeOf, TestAgent } from "../support/agent.js";
import { makeTestCerts } from "../support/certs.js";
import { runCli } from "../support/cli.js";
import { eventually } from "../support/eventually.js";
import { type GatewayProcess, gatewayArgs, metricValue, rand, spawnGateway } from "../support/gateway.js";
import { h100Registration } from "../support/sample-events.js";
import { openTestLog, serverSuite } from "../support/suites.js";

const IGNORED = "llmgw_gateway_revocation_entries_ignored_total";
const KNOWN = "llmgw_gateway_revocation_state_known";
const UNKNOWN_REFUSALS = "llmgw_gateway_revocation_unknown_refusals_total";

describe("revocation entries apply only when their value names the key's CN or serial", () => {
  const env = serverSuite();

  it("ignores unparsable and mismatched values (counted, logged), applies llmgw revoke's, and a bad value over one lifts it", async () => {
    const { stream, prefix, close } = await openTestLog(env.server.url, "GWREVV");
    const bucket = `revoked_${rand()}`;
    let gw: GatewayProcess | undefined;
    const agents: TestAgent[] = [];
    const nc = await connectNats({ url: env.server.url, name: "test revocation writer" });
    try {
      gw = await spawnGateway(
        gatewayArgs({ id: "gw-revv", nats: env.server.url, stream, prefix, revokedBucket: bucket }),
        env.certs,
      );
      const metrics = gw.metricsUrl!;
      assert.equal(await metricValue(metrics, KNOWN), 1);
      const kv = await new Kvm(nc).open(bucket);
      const node = "gpu-revv-1";
      const serial = new X509Certificate(env.tls("gpu-revv-2").cert).serialNumber
        .toLowerCase()
        .replace(/^0+/, "");
      const entry = (o: Record<string, unknown>) =>
        JSON.stringify({ reason: "forged", revokedAtMs: Date.now(), by: "mallory", ...o });
      const admitted = async (cn: string) => {
        const a = await TestAgent.connect({
          baseUrl: gw!.url,
          tls: env.tls(cn),
          registration: h100Registration(cn),
        });
        agents.push(a);
        assert.notEqual(a.sessionId, "");
        a.abort();
      };
      const refused = async (cn: string) => {
        const a = TestAgent.open({ baseUrl: gw!.url, tls: env.tls(cn), registration: h100Registration(cn) });
        agents.push(a);
        assert.equal(codeOf(await a.ended), "PermissionDenied", cn);
      };

      const writes: Array<[string, string, string]> = [
        [`cn-${node}`, "not json", "the value is not JSON"],
        [`cn-${node}`, JSON.stringify({ because: "I said so" }), "the value is not a revocation"],
        [`cn-${node}`, entry({ cn: "gpu-someone-else" }), 'the value names CN "gpu-someone-else"'],
        [
          `serial-${serial}`,
          entry({ cn: "gpu-revv-2", serial: "abc123" }),
          'the value names serial "abc123"',
        ],
        [`serial-${serial}`, entry({ cn: "gpu-revv-2" }), 'the value names serial ""'],
      ];
      let ignored = await metricValue(metrics, IGNORED);
      for (const [key, value, why] of writes) {
        await kv.put(key, value);
        const want = ++ignored;
        await eventually(async () => (await metricValue(metrics, IGNORED)) >= want, {
          what: `${key} = ${value} counted as not applied`,
        });
        // The log line comes through the process's pipe, which can trail the metric.
        const lastLine = () =>
          gw!
            .output()
            .split("\n")
            .filter((l) => l.includes("revocation entry not applied") && l.includes(key))
            .at(-1);
        const whyText = JSON.stringify(why).slice(1, -1);
        await eventually(async () => lastLine()?.includes(whyText) === true, {
          what: `the log line for ${key} saying: ${why}`,
        });
      }
      assert.equal(await metricValue(metrics, "llmgw_gateway_revoked_identities"), 0);
      await admitted(node);
      await admitted("gpu-revv-2");

      // What llmgw revoke writes applies; a bad value written over it lifts it.
      const r = await runCli(["revoke", node, "--nats", env.server.url, "--revoked-bucket", bucket]);
      assert.equal(r.code, 0, r.stderr);
      await eventually(async () => (await metricValue(metrics, "llmgw_gateway_revoked_identities")) === 1, {
        what: "the revocation applied",
      });
      await refused(node);
      const bySerial = await runCli([
        ...["revoke", "gpu-revv-2", "--serial", serial],
        ...["--nats", env.server.url, "--revoked-bucket", bucket],
      ]);
      assert.equal(bySerial.code, 0, bySerial.stderr);
      await eventually(async () => (await metricValue(metrics, "llmgw_gateway_revoked_identities")) === 2, {
        what: "the serial revocation applied",
      });
      await refused("gpu-revv-2");
      await kv.put(`cn-${node}`, entry({ cn: "gpu-someone-else" }));
      await eventually(async () => (await metricValue(metrics, "llmgw_gateway_revoked_identities")) === 1, {
        what: "the mismatched value to lift the revocation",
      });
      await admitted(node);
      await refused("gpu-revv-2");
    } finally {
      for (const a of agents) a.abort();
      gw?.proc.kill("SIGKILL");
      await gw?.exited;
      await nc.close();
      await close();
    }
  });
});

describe("revocation fails closed", () => {
  it("a gateway whose NATS user cannot read the revocation bucket refuses new sessions (Unavailable, metric, log) until it can", async () => {
    const dir = tempDir("nats-auth-rev");
    const stream = uniqueStream("REVFC");
    const prefix = `revfc${rand()}.evt`;
    const leases = `gwl_${rand()}`;
    const readable = `rev_${rand()}`;
    const unreadable = `rev_${rand()}`;
    // The gateway's user may read `readable`; the gateway is told to use `unreadable`.
    const init = await runCli([
      ...["nats-auth", "init", "--dir", dir, "--stream", stream, "--subject-prefix", prefix],
      ...["--gateways-bucket", leases, "--revoked-bucket", readable],
    ]);
    assert.equal(init.code, 0, init.stderr);
    const authConf = join(dir, "auth.conf");
    const server = await startServer({ include: authConf });
    const certs = makeTestCerts();
    const creds = join(dir, "gateway.nk");
    let gw: GatewayProcess | undefined;
    const agents: TestAgent[] = [];
    try {
      gw = await spawnGateway(
        gatewayArgs(
          {
            id: "gw-revfc",
            nats: server.url,
            stream,
            prefix,
            leaseBucket: leases,
            revokedBucket: unreadable,
          },
          ...["--nats-creds", creds],
        ),
        certs,
      );
      const metrics = gw.metricsUrl!;
      const tls = { ca: certs.ca, ...certs.client("gpu-revfc-1") };
      assert.equal(await metricValue(metrics, KNOWN), 0);
      for (let i = 0; i < 2; i++) {
        const a = TestAgent.open({ baseUrl: gw.url, tls, registration: h100Registration("gpu-revfc-1") });
        agents.push(a);
        const err = await a.ended;
        assert.equal(codeOf(err), "Unavailable", String(err));
        assert.match(String(err), new RegExp(`cannot read its revocation bucket ${unreadable}`));
        assert.equal(a.sessionId, "", "no session opened");
      }
      assert.ok((await metricValue(metrics, UNKNOWN_REFUSALS)) >= 2);
      assert.match(gw.output(), /revocation state unknown \(the revocation bucket cannot be read\)/);

      // The server's permissions now let the gateway read that bucket (reloaded, as an operator would).
      writeFileSync(authConf, readFileSync(authConf, "utf8").replaceAll(readable, unreadable));
      process.kill(server.pid, "SIGHUP");
      await eventually(async () => (await metricValue(metrics, KNOWN)) === 1, {
        what: "the gateway to read its revocation bucket",
        timeoutMs: 20_000,
      });
      // The log line goes through a pipe: it may arrive just after the metric moved.
      await eventually(() => /revocation state known: new sessions are admitted again/.test(gw!.output()), {
        what: "the gateway to log that revocations are known again",
        timeoutMs: 10_000,
      });
      const a = await TestAgent.connect({
        baseUrl: gw.url,
        tls,
        registration: h100Registration("gpu-revfc-1"),
      });
      agents.push(a);
      assert.notEqual(a.sessionId, "");
    } finally {
      for (const a of agents) a.abort();
      gw?.proc.kill("SIGKILL");
      await gw?.exited;
      await server.close();
    }
  });
});
