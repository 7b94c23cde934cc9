import { makeTestCerts } from "./test/support/certs.js";
import { runConnectionFlood } from "./test/support/connection-flood.js";
import { rand, spawnGateway } from "./test/support/gateway.js";
import { openTestLog } from "./test/support/suites.js";
import { startServer } from "./test/harness/nats.js";
const server = await startServer();
const certs = makeTestCerts();
const { log, stream, prefix } = await openTestLog(server.url, "BENCHFLOOD");
const gw = await spawnGateway(["--id", `gw-flood-${rand()}`, "--nats", server.url, "--stream", stream, "--subject-prefix", prefix, "--lease-bucket", `leases_${rand()}`, "--max-connections-per-address", "100", "--metrics-listen", "127.0.0.1:0"], certs, {}, { maxOpenFiles: 300 });
console.log(gw.output().split("\n").filter(l => l.includes("listening")));
const r = await runConnectionFlood({ url: gw.url, certs, pid: gw.proc.pid!, honestAddress: "127.0.0.2", honestAgents: 1, settleMs: 1000, idle: 0, attackerAddresses: ["127.0.0.1"], durationMs: Number(process.argv[2] ?? 10000) });
const murl = /"metrics":"(http:[^"]+)"/.exec(gw.output())![1]!;
console.log((await (await fetch(murl)).text()).split("\n").filter(l => /^(nodejs_heap_size|nodejs_external|llmgw_gateway_conn|process_resident)/.test(l)).join("\n"));
console.log(r.rssKbBefore, r.rssKbPeak, r.rssKbAfter, r.rapidResetStreams, r.rapidResetCutOffs);
const counts = new Map<string, number>();
for (const l of gw.output().split("\n")) { const m = /"msg":"([^"]+)"/.exec(l); if (m) counts.set(m[1]!, (counts.get(m[1]!) ?? 0) + 1); }
console.log(counts, gw.output().length);
gw.proc.kill("SIGKILL"); await log.close(); await server.close();
