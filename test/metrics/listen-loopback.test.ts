/**
 * Metrics endpoints listen on loopback unless told otherwise: a port alone
 * (`:0`, `9090`) binds 127.0.0.1, in real gateway and reconciler processes;
 * another address of this machine gets no answer there. Every address is
 * taken only when named (0.0.0.0).
 */
import assert from "node:assert/strict";
import { connect } from "node:net";
import { networkInterfaces } from "node:os";
import { describe, it } from "node:test";
import { parseListen } from "../../src/metrics-endpoint/index.js";
import { type GatewayProcess, gatewayArgs, rand, spawnGateway } from "../support/gateway.js";
import { spawnReconciler } from "../support/reconciler.js";
import { openTestLog, serverSuite } from "../support/suites.js";

/** This machine's first non-loopback IPv4 address, when it has one. */
function otherAddress(): string | undefined {
  return Object.values(networkInterfaces())
    .flat()
    .find((a) => a && a.family === "IPv4" && !a.internal)?.address;
}

/** Whether a TCP connection to host:port is accepted. */
function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host, port });
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

describe("metrics listen on loopback by default", () => {
  const env = serverSuite();

  it("reads a port alone as loopback, and every address only when named", () => {
    assert.deepEqual(parseListen(":9090"), { host: "127.0.0.1", port: 9090 });
    assert.deepEqual(parseListen("9090"), { host: "127.0.0.1", port: 9090 });
    assert.deepEqual(parseListen("0.0.0.0:9090"), { host: "0.0.0.0", port: 9090 });
    assert.deepEqual(parseListen("[::1]:9090"), { host: "::1", port: 9090 });
    assert.throws(() => parseListen("metrics"), /a port alone listens on loopback/);
    assert.throws(() => parseListen(":70000"), RangeError);
  });

  it("a gateway and a reconciler given --metrics-listen :0 serve /metrics on 127.0.0.1 only", async () => {
    const { stream, prefix, close } = await openTestLog(env.server.url, "METLO");
    let gw: GatewayProcess | undefined;
    const rec = await spawnReconciler({
      id: "rec-metrics-lo",
      nats: env.server.url,
      stream,
      prefix,
      leaseBucket: `lease_${rand()}`,
      gatewaysBucket: `gwl_${rand()}`,
      args: ["--metrics-listen", ":0"],
    });
    try {
      gw = await spawnGateway(
        gatewayArgs({
          id: "gw-metrics-lo",
          nats: env.server.url,
          stream,
          prefix,
          revokedBucket: `revoked_${rand()}`,
          metricsListen: ":0",
        }),
        env.certs,
      );
      const recLine = rec.lines.find((l) => l.msg === "metrics listening");
      const recAddress = String(recLine?.["metrics"]);
      assert.match(recAddress, /^127\.0\.0\.1:[1-9]\d*$/, "the reconciler's bound address");
      const gwUrl = new URL(gw.metricsUrl ?? "");
      assert.equal(gwUrl.hostname, "127.0.0.1", "the gateway's metrics URL");
      for (const [host, port] of [
        ["127.0.0.1", Number(recAddress.split(":")[1])],
        [gwUrl.hostname, Number(gwUrl.port)],
      ] as const) {
        const res = await fetch(`http://${host}:${port}/metrics`);
        assert.equal(res.status, 200);
        const other = otherAddress();
        if (other !== undefined) assert.equal(await accepts(other, port), false, `${other}:${port} answers`);
      }
    } finally {
      gw?.proc.kill("SIGKILL");
      await gw?.exited;
      await rec.kill();
      await close();
    }
  });
});
