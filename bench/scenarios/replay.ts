/**
 * Replay: a realistic log (sessions, passes with start commands, shard
 * statuses, usage changes, cordons) written to a fresh stream, then in the
 * same run:
 *   - raw: an ordered-consumer read of the whole stream (events decoded, no
 *     fold), before and after the fold (their mean);
 *   - the projection runtime catching up from nothing (read, decode, fold);
 *   - a restart from a snapshot near the end vs the full replay (time, RSS).
 * RSS is measured in child processes, one per restart, so each figure is
 * the memory of that restart alone.
 */
import { createHash } from "node:crypto";
import { AppendWindow, openLog } from "../../src/log/index.js";
import { canonicalJson, type FleetState, fleetProjection } from "../../src/projections/index.js";
import { openKvSnapshotStore, ProjectionRuntime } from "../../src/projections/runtime/index.js";
import { startServer, uniqueStream } from "../../test/harness/nats.js";
import { spawnScript } from "../../test/harness/proc.js";
import { fleetChurn } from "../../test/support/fleet-churn.js";
import { figure, type Scenario } from "../support/result.js";

const SNAPSHOT_BUCKET = "bench_snapshots";

export const replay: Scenario = {
  name: "replay",
  describe: "fold rate of a realistic log vs raw ordered-consumer read; restart from a snapshot",
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

      // The raw read runs before and after the fold and counts as their mean,
      // so a machine whose load changes during the run moves both sides alike.
      const rawRead = async (label: string) => {
        ctx.progress(`raw ordered-consumer read (${label})`);
        const start = performance.now();
        let n = 0;
        for await (const _ of log.read()) {
          if (++n % 50_000 === 0) ctx.progress(`raw read (${label}): ${n.toLocaleString("en")}`);
        }
        return { n, ms: performance.now() - start };
      };
      const rawBefore = await rawRead("before the fold");
      const read = rawBefore.n;

      // The catch-up saves a snapshot at 90 % of the log, as the runtime does periodically.
      ctx.progress("runtime catch-up from nothing");
      const snapSeq = Math.floor(last * 0.9);
      const snaps = await openKvSnapshotStore<FleetState>(log, { bucket: SNAPSHOT_BUCKET });
      if (!snaps) throw new Error("no snapshot store");
      t = performance.now();
      const full = new ProjectionRuntime(log, fleetProjection, {
        snapshots: snaps,
        snapshotEvery: { events: snapSeq, ms: 3_600_000 },
      });
      const ticker = setInterval(
        () => ctx.progress(`fold: ${full.eventsFolded.toLocaleString("en")}`),
        1_000,
      );
      await full.start();
      clearInterval(ticker);
      const foldMs = performance.now() - t;
      const folded = full.eventsFolded;
      const fullJson = sha256(canonicalJson(full.state));
      await full.stop();
      const rawAfter = await rawRead("after the fold");
      const rawMs = (rawBefore.ms + rawAfter.ms) / 2;
      const snap = await snaps.loadNewest(fleetProjection, { maxSeq: last });
      if (!snap) throw new Error("the catch-up saved no snapshot");
      const meta = { bytes: Buffer.byteLength(canonicalJson(snap.state)), seq: snap.meta.seq };

      ctx.progress("restart: full replay (child process)");
      const fullRestart = await restartInChild(server.url, stream, false);
      ctx.progress("restart: from the snapshot (child process)");
      const snapRestart = await restartInChild(server.url, stream, true);
      if (snapRestart.json !== fullJson || fullRestart.json !== fullJson)
        throw new Error("a restarted projection differs from the full replay");

      const foldRate = folded / (foldMs / 1000);
      const rawRate = read / (rawMs / 1000);
      return {
        params: { events, nodes, lastSeq: last, snapshotSeq: meta.seq, stateBytes: meta.bytes },
        figures: [
          figure("fold rate (runtime catch-up from nothing)", foldRate, "events/s", {
            raw: { name: "ordered-consumer read + decode", value: rawRate },
            goal: "ratio ≥ 0.7",
            met: foldRate / rawRate >= 0.7,
          }),
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
          `raw read: ${Math.round(read / (rawBefore.ms / 1000)).toLocaleString("en")} events/s before the fold, ${Math.round(rawAfter.n / (rawAfter.ms / 1000)).toLocaleString("en")} after (the figure uses their mean time)`,
          `${events.toLocaleString("en")} events over ${nodes} nodes written in ${(writeMs / 1000).toFixed(1)} s; state ${(meta.bytes / 2 ** 20).toFixed(1)} MiB of canonical JSON; restarted states equal the full replay`,
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

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}
