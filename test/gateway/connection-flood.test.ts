/**
 * The load: 1,000 idle TLS connections (with and without client
 * certificates, before and after the HTTP/2 preface), a rapid-reset client
 * and slowloris clients against ONE `llmgw gateway` process run with a
 * file-descriptor limit of 300 and its default deadlines, while honest
 * agents from another address keep connecting and reporting. Asserted:
 * every idle and slow connection is closed, the rapid-reset session is cut
 * off, every honest agent registers and every report of theirs is
 * acknowledged, the gateway stays up and its memory bounded. Timings are
 * generous liveness bounds; the figures are measured by bench/connection-flood.ts.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { makeTestCerts } from "../support/certs.js";
import { IDLE_KINDS, runConnectionFlood } from "../support/connection-flood.js";
import { type GatewayProcess, gatewayArgs, rand, spawnGateway } from "../support/gateway.js";
import { openTestLog, serverSuite } from "../support/suites.js";

const MAX_OPEN_FILES = 300;
/**
 * Far above what the flood takes (about 400 MiB: the heap V8 grows under
 * rapid reset, docs/RELIABILITY.md): a bound on growth, not a figure.
 */
const RSS_BOUND_KB = 1024 * 1024;

describe("gateway process: a connection flood under a low file-descriptor limit", () => {
  const env = serverSuite();

  it("closes idle and slow connections, cuts off rapid reset, and keeps serving honest agents", async () => {
    const certs = makeTestCerts();
    const { log, stream, prefix } = await openTestLog(env.server.url, "GWFLOOD");
    let gw: GatewayProcess | undefined;
    try {
      gw = await spawnGateway(
        gatewayArgs(
          { id: `gw-flood-${rand()}`, nats: env.server.url, stream, prefix, metricsListen: false },
          // Room for honest agents beside two attacker addresses at their cap.
          ...["--max-connections-per-address", "100"],
        ),
        certs,
        {},
        { maxOpenFiles: MAX_OPEN_FILES },
      );
      const pid = gw.proc.pid ?? 0;
      assert.match(
        readFileSync(`/proc/${pid}/limits`, "utf8"),
        new RegExp(`^Max open files\\s+${MAX_OPEN_FILES}\\s`, "m"),
        "the gateway runs with the low limit",
      );
      const r = await runConnectionFlood({
        url: gw.url,
        certs,
        pid,
        idle: 1_000,
        attackerAddresses: ["127.0.0.1", "127.0.0.3"],
        honestAddress: "127.0.0.2",
        honestAgents: 5,
        durationMs: 12_000,
        settleMs: 15_000,
      });
      assert.equal(r.idleOpened, 1_000);
      assert.equal(r.idleStillOpen, 0, "every idle connection was closed");
      for (const kind of IDLE_KINDS)
        assert.ok(r.idleClosedMs[kind].length > 0, `idle ${kind} connections closed`);
      assert.equal(r.slowlorisStillOpen, 0, "every slowloris connection was closed");
      assert.ok(r.rapidResetCutOffs > 0, "the rapid-reset client was cut off");
      assert.deepEqual(r.honestFailures, [], "honest agents were served");
      assert.equal(r.honestRegistered, 5, "every honest agent registered");
      assert.ok(r.honestAckMs.length >= 5, "honest agents' reports were acknowledged");
      assert.equal(gw.proc.exitCode, null, `the gateway is still running:\n${gw.output().slice(-2000)}`);
      assert.ok(r.rssKbPeak < RSS_BOUND_KB, `the gateway's RSS stayed bounded (peak ${r.rssKbPeak} kB)`);
    } finally {
      gw?.proc.kill("SIGKILL");
      await gw?.exited;
      await log.close();
    }
  });
});
