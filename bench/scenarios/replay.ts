/**
 * Replay: a realistic log (sessions, passes with start commands, shard
 * statuses, usage changes, cordons) written to a fresh stream, then in the
 * same run:
 *   - the raw limit: a bare ordered-consumer read of the whole stream
 *     (`consume({ max_messages: 10_000 })`, nothing decoded), before and
 *     after the rest (their mean, so load that changes during the run moves
 *     both sides alike);
 *   - decode only: the same bare read, each message decoded by the log's
 *     decoder (`decodeEvent`);
 *   - fold only: the events decoded in chunks of 10,000, the time of the
 *     fold of each chunk alone (no read, no decode), and the state compared
 *     with the catch-up's;
 *   - the projection runtime catching up from nothing (read, decode, fold):
 *     the figure with the goal, ≥ 0.75 of the bare read;
 *   - a restart from a snapshot near the end vs the full replay (time, RSS).
 * RSS is measured in child processes, one per restart, so each figure is
 * the memory of that restart alone.
 */
import { createHash } from "node:crypto";
import type { Event } from "../../src/gen/llmgw/v1/events_pb.js";
import { AppendWindow, decodeEvent, openLog, streamTimeMs } from "../../src/log/index.js";
import { canonicalJson, type FleetState, fleetProjection } from "../../src/projections/index.js";
import { openKvSnapshotStore, ProjectionRuntime } from "../../src/projections/runtime/index.js";
import { startServer, uniqueStream } from "../../test/harness/nats.js";
import { spawnScript } from "../../test/harness/proc.js";
import { fleetChurn } from "../../test/support/fleet-churn.js";
import { bareRead } from "../support/bare-read.js";
import { figure, type Scenario } from "../support/result.js";

const SNAPSHOT_BUCKET = "bench_snapshots";

export const replay: Scenario = {
  name: "replay",
  describe:
    "fold rate of a realistic log vs a bare ordered-consumer read, decode and fold alone beside it; restart from a snapshot",
  async run(ctx) {
    const events = ctx.quick ? 20_000 : 1_000_000;
    const nodes = 64;
    const server = await startServer();
    const stream = uniqueStream("REPLAY");
    const log = await openLog({ url: server.url, clientName: "bench-replay", name: stream });
    try {
      let t = performance.now();
      const window = new AppendWindow(log.appender, 256);
      const acks: Promise<unknown>[] = [];
      let written = 0;
      for (const e of fleetChurn({ nodes, events })) {
        const { acked } = await window.start(e);
        acks.push(acked);
        if (acks.length >= 4096) {
          await Promise.all(acks.splice(0));
          written += 4096;
          ctx.progress(`writing the log: ${written.toLocaleString("en")}/${events.toLocaleString("en")}`);
        }
      }
      await Promise.all(acks);
      const writeMs = performance.now() - t;
      const last = await log.lastSeq();

      const n = (x: number) => x.toLocaleString("en");
      // The raw limit: a bare read, before and after everything else.
      const bare = (label: string) =>
        bareRead(
          log,
          last,
          () => {},
          (k) => ctx.progress(`bare read (${label}): ${n(k)}/${n(last)}`),
        );
      // This process's CPU time per phase beside the wall time: on a shared
      // machine the wall time of each phase moves with the others' load,
      // its own CPU time much less (the server's is not in it).
      const cpu = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1000;
      let c0 = process.cpuUsage();
      const bareBefore = await bare("before the rest");
      const bareBeforeCpu = cpu(process.cpuUsage(c0));
      c0 = process.cpuUsage();

      const decodeOnly = await bareRead(
        log,
        last,
        (m) => decodeEvent(m.data, m.seq),
        (k) => ctx.progress(`decode only: ${n(k)}/${n(last)}`),
      );

      const decodeOnlyCpu = cpu(process.cpuUsage(c0));
      // Fold only: chunks decoded first, then folded under the clock.
      let alone = fleetProjection.initialState();
      let foldAloneMs = 0;
      let chunk: Array<{ event: Event; seq: number; timeMs: number }> = [];
      const foldChunk = () => {
        const t0 = performance.now();
        for (const r of chunk) alone = fleetProjection.evolve(alone, r.event, r);
        foldAloneMs += performance.now() - t0;
        chunk = [];
      };
      const foldRead = await bareRead(
        log,
        last,
        (m) => {
          chunk.push({ event: decodeEvent(m.data, m.seq), seq: m.seq, timeMs: streamTimeMs(m) });
          if (chunk.length >= 10_000) foldChunk();
        },
        (k) => ctx.progress(`fold only: ${n(k)}/${n(last)}`),
      );
      foldChunk();

      // The catch-up saves a snapshot at 90 % of the log, as the runtime does periodically.
      ctx.progress("runtime catch-up from nothing");
      const snapSeq = Math.floor(last * 0.9);
      const snaps = await openKvSnapshotStore<FleetState>(log, { bucket: SNAPSHOT_BUCKET });
      if (!snaps) throw new Error("no snapshot store");
      t = performance.now();
      c0 = process.cpuUsage();
      const full = new ProjectionRuntime(log, fleetProjection, {
        snapshots: snaps,
        snapshotEvery: { events: snapSeq, ms: 3_600_000 },
      });
      const ticker = setInterval(
        () => ctx.progress(`runtime catch-up: ${n(full.eventsFolded)}/${n(last)}`),
        1_000,
      );
      await full.start();
      clearInterval(ticker);
      const foldMs = performance.now() - t;
      const foldCpu = cpu(process.cpuUsage(c0));
      const folded = full.eventsFolded;
      const fullJson = sha256(canonicalJson(full.state));
      await full.stop();
      if (sha256(canonicalJson(alone)) !== fullJson)
        throw new Error("the fold alone differs from the runtime's catch-up");
      c0 = process.cpuUsage();
      const bareAfter = await bare("after the rest");
      const bareCpu = (bareBeforeCpu + cpu(process.cpuUsage(c0))) / 2;
      if (bareBefore.n !== last || bareAfter.n !== last || decodeOnly.n !== last || foldRead.n !== last)
        throw new Error(`a read ended early (the stream holds ${last})`);
      const bareMs = (bareBefore.ms + bareAfter.ms) / 2;
      const snap = await snaps.loadNewest(fleetProjection, { maxSeq: last });
      if (!snap) throw new Error("the catch-up saved no snapshot");
      const meta = { bytes: Buffer.byteLength(canonicalJson(snap.state)), seq: snap.meta.seq };

      ctx.progress("restart: full replay (child process)");
      const fullRestart = await restartInChild(server.url, stream, false);
      ctx.progress("restart: from the snapshot (child process)");
      const snapRestart = await restartInChild(server.url, stream, true);
      if (snapRestart.json !== fullJson || fullRestart.json !== fullJson)
        throw new Error("a restarted projection differs from the full replay");

      const rate = (events: number, ms: number) => events / (ms / 1000);
      const bareRate = rate(last, bareMs);
      const raw = { name: "bare ordered-consumer read", value: bareRate };
      const foldRate = rate(folded, foldMs);
      return {
        params: { events, nodes, lastSeq: last, snapshotSeq: meta.seq, stateBytes: meta.bytes },
        figures: [
          figure("fold rate (runtime catch-up from nothing)", foldRate, "events/s", {
            raw,
            goal: "ratio ≥ 0.75",
            met: foldRate / bareRate >= 0.75,
          }),
          figure("decode only (bare read + decodeEvent)", rate(last, decodeOnly.ms), "events/s", { raw }),
          figure("fold only (decoded events, no read)", rate(last, foldAloneMs), "events/s", { raw }),
          figure("restart: full replay", fullRestart.ms, "ms", {}),
          figure("restart: from the newest snapshot (~90 %)", snapRestart.ms, "ms", {
            raw: { name: "full replay", value: fullRestart.ms },
            higherIsBetter: false,
          }),
          figure("restart RSS: full replay", fullRestart.rssBytes / 2 ** 20, "MiB", {}),
          figure("restart RSS: from a snapshot", snapRestart.rssBytes / 2 ** 20, "MiB", {
            raw: { name: "full replay", value: fullRestart.rssBytes / 2 ** 20 },
            higherIsBetter: false,
          }),
        ],
        notes: [
          `bare read: ${n(Math.round(rate(last, bareBefore.ms)))} events/s before the rest, ${n(Math.round(rate(last, bareAfter.ms)))} after (the raw figure uses their mean time)`,
          `per event: bare read ${us(bareMs, last)}, decode only ${us(decodeOnly.ms, last)} (read included), fold alone ${us(foldAloneMs, last)}, runtime catch-up ${us(foldMs, folded)}`,
          `this process's CPU per event: bare read ${us(bareCpu, last)}, decode only ${us(decodeOnlyCpu, last)}, runtime catch-up ${us(foldCpu, folded)} (bare / catch-up ${(bareCpu / last / (foldCpu / folded)).toFixed(2)})`,
          `${n(events)} events over ${nodes} nodes written in ${(writeMs / 1000).toFixed(1)} s; state ${(meta.bytes / 2 ** 20).toFixed(1)} MiB of canonical JSON; the fold alone and restarted states equal the full replay`,
        ],
      };
    } finally {
      await log.jsm.streams.delete(stream).catch(() => {});
      await log.close();
      await server.close();
    }
  },
};

async function restartInChild(
  url: string,
  stream: string,
  fromSnapshot: boolean,
): Promise<{ ms: number; rssBytes: number; json: string }> {
  const child = spawnScript(new URL("../support/restart-child.ts", import.meta.url).pathname, [
    url,
    stream,
    fromSnapshot ? SNAPSHOT_BUCKET : "",
  ]);
  const msg = await new Promise<{ ms: number; rssBytes: number; json: string }>((resolve, reject) => {
    child.proc.once("message", (m) => resolve(m as { ms: number; rssBytes: number; json: string }));
    void child.exited.then((code) => reject(new Error(`restart child exited ${code}:\n${child.output()}`)));
  });
  await child.stop();
  return msg;
}

/** Used by the restart child. */
export async function restartOnce(url: string, stream: string, bucket: string) {
  const log = await openLog({ url, clientName: "bench-restart", name: stream, ensure: false });
  const snaps = bucket ? await openKvSnapshotStore<FleetState>(log, { bucket }) : undefined;
  const t = performance.now();
  const rt = new ProjectionRuntime(log, fleetProjection, snaps ? { snapshots: snaps } : {});
  await rt.start();
  const ms = performance.now() - t;
  const rssBytes = process.memoryUsage().rss;
  const json = sha256(canonicalJson(rt.state));
  await rt.stop();
  await log.close();
  return { ms, rssBytes, json };
}

function us(ms: number, events: number): string {
  return `${((ms * 1000) / events).toFixed(2)} µs`;
}

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}
