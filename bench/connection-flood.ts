/**
 * The connection flood of test/gateway/connection-flood.test.ts, measured
 * (no assertions): one `llmgw gateway` process (TLS, default deadlines)
 * under a file-descriptor limit, honest agents alone first (the baseline),
 * then the same agents beside 1,000 idle connections of five kinds, a
 * rapid-reset client and slowloris clients per attacker address. Prints how
 * fast idle connections were closed, the honest agents' ack latency, the
 * gateway's RSS and its connection metrics.
 *
 * Run: node --import tsx bench/connection-flood.ts [idle connections, default 1000] [fd limit, default 300]
 */

import { startServer } from "../test/harness/nats.js";
import { makeTestCerts } from "../test/support/certs.js";
import {
  type FloodResult,
  IDLE_KINDS,
  percentile,
  runConnectionFlood,
} from "../test/support/connection-flood.js";
import { rand, spawnGateway } from "../test/support/gateway.js";
import { openTestLog } from "../test/support/suites.js";

const idle = Number(process.argv[2] ?? 1_000);
const maxOpenFiles = Number(process.argv[3] ?? 300);
const server = await startServer();
const certs = makeTestCerts();
const { log, stream, prefix } = await openTestLog(server.url, "BENCHFLOOD");
const gw = await spawnGateway(
  [
    ...["--id", `gw-flood-${rand()}`, "--nats", server.url, "--stream", stream],
    ...["--subject-prefix", prefix, "--lease-bucket", `leases_${rand()}`],
    ...["--max-connections-per-address", "100", "--metrics-listen", "127.0.0.1:0"],
  ],
  certs,
  {},
  { maxOpenFiles },
);
const metricsUrl = /"metrics":"(http:\/\/[^"]+)"/.exec(gw.output())?.[1];
const pid = gw.proc.pid ?? 0;
const ms = (v: number) => `${v.toFixed(0)} ms`;
const latency = (r: FloodResult) =>
  `p50 ${ms(percentile(r.honestAckMs, 50))}, p99 ${ms(percentile(r.honestAckMs, 99))}, max ${ms(Math.max(...r.honestAckMs))} (${r.honestAckMs.length} reports)`;

try {
  const common = { url: gw.url, certs, pid, honestAddress: "127.0.0.2", honestAgents: 5, settleMs: 20_000 };
  const baseline = await runConnectionFlood({ ...common, idle: 0, attackerAddresses: [], durationMs: 6_000 });
  const r = await runConnectionFlood({
    ...common,
    idle,
    attackerAddresses: ["127.0.0.1", "127.0.0.3"],
    durationMs: 12_000,
  });
  console.log(
    `gateway: TLS, default deadlines, file-descriptor limit ${maxOpenFiles}, 100 connections per address`,
  );
  console.log(`baseline (no attack): honest ack latency ${latency(baseline)}; RSS ${baseline.rssKbAfter} kB`);
  console.log(
    `idle connections opened: ${r.idleOpened}; still open after the attack + 20 s: ${r.idleStillOpen}`,
  );
  for (const kind of IDLE_KINDS) {
    const v = r.idleClosedMs[kind];
    console.log(
      `  ${kind.padEnd(12)} ${String(v.length).padStart(4)} closed: p50 ${ms(percentile(v, 50))}, max ${ms(Math.max(...v))} after connecting`,
    );
  }
  console.log(
    `slowloris: ${r.slowlorisHeldMs.length} closed after ${r.slowlorisHeldMs.map(ms).join(", ")}; still open ${r.slowlorisStillOpen}`,
  );
  console.log(
    `rapid reset: ${r.rapidResetStreams} streams reset, session cut off ${r.rapidResetCutOffs} times`,
  );
  console.log(
    `honest agents: ${r.honestRegistered} registered during the attack, ${r.honestFailures.length} failures; ack latency ${latency(r)}`,
  );
  console.log(`gateway RSS: before ${r.rssKbBefore} kB, peak ${r.rssKbPeak} kB, after ${r.rssKbAfter} kB`);
  if (metricsUrl) {
    const text = await (await fetch(metricsUrl)).text();
    for (const line of text.split("\n"))
      if (/^llmgw_gateway_connections_/.test(line) || /^llmgw_gateway_streams_rejected_total/.test(line))
        console.log(`  ${line}`);
  }
  for (const f of r.honestFailures) console.log(`  failure: ${f}`);
} finally {
  gw.proc.kill("SIGKILL");
  await gw.exited;
  await log.close();
  await server.close();
}
