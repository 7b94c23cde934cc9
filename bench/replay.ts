/**
 * Replay benchmark: writes N events of a realistic mix (sessions, passes
 * with start commands, shard statuses, usage changes, cordons) to a fresh
 * stream on a nats-server it starts, then measures in the same run:
 *   - the raw ordered-consumer read rate (decode included, no fold),
 *   - the fold rate (the projection runtime's catch-up from nothing),
 *   - a restart from a snapshot vs a full replay, with RSS.
 * It asserts nothing; it prints a table and ratios.
 *
 *   node --import tsx bench/replay.ts               # 100 000 events
 *   node --import tsx bench/replay.ts --events 1000000
 *   node --import tsx bench/replay.ts --events 50000 --nodes 200
 */
import { parseArgs } from "node:util";
import { AppendWindow, openLog } from "../src/log/index.js";
import { canonicalJson, type FleetState, fleetProjection } from "../src/projections/index.js";
import { openKvSnapshotStore, ProjectionRuntime } from "../src/projections/runtime/index.js";
import { fleetChurn } from "../test/support/fleet-churn.js";
import { startServer, uniqueStream } from "./support/nats.js";

const { values } = parseArgs({
  options: {
    events: { type: "string", default: "100000" },
    nodes: { type: "string", default: "64" },
    "snapshot-at": { type: "string", default: "0.9" },
  },
});
const N = Number(values.events);
const NODES = Number(values.nodes);
const SNAPSHOT_AT = Number(values["snapshot-at"]);

const mib = (b: number) => `${(b / 1024 / 1024).toFixed(0)} MiB`;
const rate = (n: number, ms: number) => `${Math.round(n / (ms / 1000)).toLocaleString("en")}/s`;
const rows: string[][] = [["measure", "events", "time", "rate", "rss after"]];
const row = (name: string, n: number, ms: number) =>
  rows.push([
    name,
    n.toLocaleString("en"),
    `${(ms / 1000).toFixed(2)} s`,
    rate(n, ms),
    mib(process.memoryUsage().rss),
  ]);

const server = await startServer();
const log = await openLog({ url: server.url, clientName: "bench-replay", name: uniqueStream("BENCH") });
try {
  // Write
  let t = performance.now();
  const window = new AppendWindow(log.appender, 256);
  const acks: Promise<unknown>[] = [];
  for (const e of fleetChurn({ nodes: NODES, events: N })) {
    const { acked } = await window.start(e);
    acks.push(acked);
    if (acks.length >= 4096) await Promise.all(acks.splice(0));
  }
  await Promise.all(acks);
  row("append (window 256)", N, performance.now() - t);
  const last = await log.lastSeq();

  // Raw read: ordered consumer + decode, no fold.
  t = performance.now();
  let read = 0;
  for await (const _ of log.read()) read++;
  const rawMs = performance.now() - t;
  row("raw ordered-consumer read", read, rawMs);

  // Fold: the runtime catching up from nothing.
  t = performance.now();
  const full = new ProjectionRuntime(log, fleetProjection);
  await full.start();
  const foldMs = performance.now() - t;
  row("runtime catch-up (full fold)", full.eventsFolded, foldMs);
  const fullJson = canonicalJson(full.state);
  await full.stop();

  // Snapshot at SNAPSHOT_AT of the log, then a restart from it.
  const snapSeq = Math.floor(last * SNAPSHOT_AT);
  const snaps = await openKvSnapshotStore<FleetState>(log, { bucket: "bench_snapshots" });
  if (!snaps) throw new Error("no snapshot store");
  // Fold up to snapSeq by reading directly, then save (what the runtime does periodically).
  let s = fleetProjection.initialState();
  let timeMs = 0;
  for await (const r of log.read({ untilSeq: snapSeq })) {
    s = fleetProjection.evolve(s, r.event, { seq: r.seq, timeMs: r.timeMs });
    timeMs = r.timeMs;
  }
  const text = canonicalJson(s);
  t = performance.now();
  const meta = await snaps.save(fleetProjection, { seq: snapSeq, timeMs }, text);
  const saveMs = performance.now() - t;

  t = performance.now();
  const restarted = new ProjectionRuntime(log, fleetProjection, { snapshots: snaps });
  await restarted.start();
  const restartMs = performance.now() - t;
  row(`restart from snapshot at ${snapSeq}`, restarted.eventsFolded, restartMs);
  const same = canonicalJson(restarted.state) === fullJson;
  await restarted.stop();

  console.log(
    `\nreplay benchmark: ${N.toLocaleString("en")} events, ${NODES} nodes, state ${mib(meta.bytes)} canonical JSON (${meta.bytes.toLocaleString("en")} bytes), snapshot saved in ${saveMs.toFixed(0)} ms\n`,
  );
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  for (const r of rows)
    console.log(r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  "));
  console.log(
    `\nfold / raw read time:            ${(foldMs / rawMs).toFixed(2)}×  (what folding adds on top of reading)`,
  );
  console.log(`full replay / snapshot restart:  ${(foldMs / restartMs).toFixed(2)}×`);
  console.log(`restart state equals full replay: ${same}`);
} finally {
  await log.jsm.streams.delete(log.stream).catch(() => {});
  await log.close();
  await server.close();
}
