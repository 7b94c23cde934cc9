import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { toBinary } from "@bufbuild/protobuf";
import { headers } from "@nats-io/transport-node";
import { pino } from "pino";
import { Registry } from "prom-client";
import { type Event, EventSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import type { Log } from "../../src/log/index.js";
import { canonicalJson, type FleetState, fleetProjection, foldFleet } from "../../src/projections/index.js";
import {
  isProjectionError,
  type KvSnapshotStore,
  openKvSnapshotStore,
  ProjectionRuntime,
} from "../../src/projections/runtime/index.js";
import { fleetChurn } from "../support/fleet-churn.js";
import { EventFactory } from "../support/fleet-events.js";
import { serverSuite, withTestLog } from "../support/suites.js";

/** A logger whose lines the test can read. */
function capturingLogger() {
  const lines: Array<{ level: number; msg: string }> = [];
  const logger = pino({ level: "debug" }, { write: (s: string) => void lines.push(JSON.parse(s)) });
  return { logger, lines };
}

async function appendAll(log: Log, events: Iterable<Event>): Promise<number> {
  let last = 0;
  for (const e of events) last = (await log.append(e)).seq;
  return last;
}

/** A fold of the whole log as it is now, read independently of the runtime. */
async function freshReplay(log: Log, untilSeq?: number): Promise<FleetState> {
  const records = [];
  for await (const r of log.read(untilSeq === undefined ? {} : { untilSeq })) records.push(r);
  return foldFleet(records);
}

describe("projection runtime against a real nats-server", () => {
  const env = serverSuite();

  const withLog = (fn: (log: Log) => Promise<void>) => withTestLog(env.server.url, "P", fn);

  it("folds what real writers append, byte-identical to a fresh replay, and follows live", () =>
    withLog(async (log) => {
      const events = [...fleetChurn({ nodes: 6, events: 120 })];
      await appendAll(log, events.slice(0, 80));
      const registry = new Registry();
      const rt = new ProjectionRuntime(log, fleetProjection, { metrics: registry });
      const changes: number[] = [];
      rt.onChange((seq) => changes.push(seq));
      try {
        await rt.start();
        assert.equal(rt.lastSeq, 80);
        assert.equal(canonicalJson(rt.state), canonicalJson(await freshReplay(log)));

        const last = await appendAll(log, events.slice(80));
        await rt.waitFor(last, { timeoutMs: 20_000 });
        assert.equal(rt.lastSeq, 120);
        assert.equal(rt.eventsFolded, 120);
        assert.equal(canonicalJson(rt.state), canonicalJson(await freshReplay(log)));
        assert.ok(changes.length > 0 && changes.at(-1) === 120, `change notifications: ${changes.join(",")}`);
        const metrics = await registry.metrics();
        assert.match(metrics, /llmgw_projection_last_seq\{projection="fleet"\} 120/);
        assert.match(metrics, /llmgw_projection_events_folded_total\{projection="fleet"\} 120/);
        assert.match(metrics, /llmgw_projection_fold_lag_seconds/);
      } finally {
        await rt.stop();
      }
    }));

  it("waitFor resolves for appended sequences and times out with a clear error", () =>
    withLog(async (log) => {
      const f = new EventFactory("w");
      const rt = new ProjectionRuntime(log, fleetProjection);
      try {
        await rt.start();
        assert.equal(rt.lastSeq, 0);
        const { seq } = await log.append(f.cordon("gpu-a1"));
        await rt.waitFor(seq, { timeoutMs: 20_000 });
        assert.equal(rt.state.inventory.nodes.get("gpu-a1")?.cordoned, true);
        await assert.rejects(
          rt.waitFor(seq + 5, { timeoutMs: 200 }),
          (err: unknown) =>
            isProjectionError(err, "timeout") &&
            /did not reach sequence 6 within 200 ms \(it is at 1/.test((err as Error).message),
        );
        const ac = new AbortController();
        const waiting = rt.waitFor(seq + 5, { signal: ac.signal });
        ac.abort();
        await assert.rejects(waiting, (err: unknown) => isProjectionError(err, "aborted"));
        const pending = rt.waitFor(seq + 5, { timeoutMs: 60_000 });
        await rt.stop();
        await assert.rejects(pending, (err: unknown) => isProjectionError(err, "stopped"));
      } finally {
        await rt.stop();
      }
    }));

  it("records malformed messages by sequence and goes on; in stop mode it fails naming the sequence", () =>
    withLog(async (log) => {
      const f = new EventFactory("m");
      await log.append(f.cordon("gpu-a1"));
      const h = headers();
      h.set("Nats-Msg-Id", "garbage-1");
      await log.js.publish(log.subjects.operator("gpu-a1"), new TextEncoder().encode("\u00ff garbage"), {
        headers: h,
      });
      await log.append(f.uncordon("gpu-a1"));

      const { logger, lines } = capturingLogger();
      const rt = new ProjectionRuntime(log, fleetProjection, { logger });
      try {
        await rt.start();
        assert.equal(rt.lastSeq, 3);
        assert.deepEqual(rt.malformedSeqs, [2]);
        assert.equal(rt.state.inventory.nodes.get("gpu-a1")?.cordoned, false);
        assert.ok(lines.some((l) => l.level === 40 && /malformed message at sequence 2/.test(l.msg)));
      } finally {
        await rt.stop();
      }

      const strict = new ProjectionRuntime(log, fleetProjection, { onMalformed: "stop" });
      await assert.rejects(
        strict.start(),
        (err: unknown) => isProjectionError(err, "failed") && /sequence 2/.test((err as Error).message),
      );
      assert.equal(strict.status, "failed");
      assert.equal(strict.lastSeq, 1);
    }));

  it("passes over an event of a kind from a newer version, counts it (metric, warning) and folds on", () =>
    withLog(async (log) => {
      const f = new EventFactory("k");
      await log.append(f.cordon("gpu-a1"));
      // What a newer version writes: a body case this version does not know (field 95), through the real log.
      const future = f.make({ case: undefined });
      const bytes = new Uint8Array([
        ...toBinary(EventSchema, future),
        ...[0xfa, 0x05, 0x03, 0x66, 0x6f, 0x6f], // field 95, bytes "foo"
      ]);
      await log.js.publish(log.subjects.operator("gpu-a1"), bytes, { msgID: future.id });
      await log.append(f.uncordon("gpu-a1"));

      const { logger, lines } = capturingLogger();
      const registry = new Registry();
      const rt = new ProjectionRuntime(log, fleetProjection, { logger, metrics: registry });
      try {
        await rt.start();
        assert.equal(rt.lastSeq, 3);
        assert.equal(rt.unknownKindCount, 1);
        assert.deepEqual(rt.malformedSeqs, [], "a new kind is not malformed");
        assert.equal(
          rt.state.inventory.nodes.get("gpu-a1")?.cordoned,
          false,
          "the events after it are folded",
        );
        assert.equal(canonicalJson(rt.state), canonicalJson(await freshReplay(log)));
        assert.match(
          await registry.metrics(),
          /llmgw_projection_unknown_kinds_total\{projection="fleet"\} 1/,
        );
        assert.ok(
          lines.some(
            (l) =>
              l.level === 40 &&
              /kind this version does not know at sequence 2 .*upgrade to fold it/.test(l.msg),
          ),
          JSON.stringify(lines.map((l) => l.msg)),
        );
      } finally {
        await rt.stop();
      }
    }));

  it("keeps following across a NATS server restart (the ordered consumer recreates itself)", () =>
    withLog(async (log) => {
      const f = new EventFactory("r");
      await log.append(f.cordon("gpu-a1"));
      const rt = new ProjectionRuntime(log, fleetProjection);
      try {
        await rt.start();
        await env.server.restart();
        // Appends wait for the client to reconnect; retry until the server takes them.
        let seq = 0;
        const deadline = Date.now() + 30_000;
        const e = f.cordon("gpu-a2");
        while (seq === 0) {
          try {
            seq = (await log.append(e)).seq;
          } catch (err) {
            if (Date.now() > deadline) throw err;
            await new Promise((r) => setTimeout(r, 200));
          }
        }
        await rt.waitFor(seq, { timeoutMs: 60_000 });
        assert.equal(rt.state.inventory.nodes.get("gpu-a2")?.cordoned, true);
        assert.equal(canonicalJson(rt.state), canonicalJson(await freshReplay(log)));
      } finally {
        await rt.stop();
      }
    }));

  describe("snapshots", () => {
    async function store(log: Log, logger?: pino.Logger): Promise<KvSnapshotStore<FleetState>> {
      const s = await openKvSnapshotStore<FleetState>(log, {
        bucket: `snap_${log.stream}`,
        keep: 3,
        ...(logger ? { logger } : {}),
      });
      assert.ok(s);
      return s;
    }

    it("a restart loads the newest snapshot, folds only what follows it, and equals a full replay", () =>
      withLog(async (log) => {
        const events = [...fleetChurn({ nodes: 5, events: 300 })];
        await appendAll(log, events.slice(0, 250));
        const snaps = await store(log);
        const first = new ProjectionRuntime(log, fleetProjection, {
          snapshots: snaps,
          snapshotEvery: { events: 100, ms: 3_600_000 },
        });
        try {
          await first.start();
          await first.snapshotNow();
        } finally {
          await first.stop();
        }
        const metas = await snaps.list("fleet");
        assert.equal(metas.at(-1)?.seq, 250);
        assert.ok(metas.length <= 3, `kept ${metas.length} snapshots`);

        await appendAll(log, events.slice(250));
        const second = new ProjectionRuntime(log, fleetProjection, { snapshots: snaps });
        try {
          await second.start();
          assert.equal(second.restoredFrom?.seq, 250);
          assert.equal(second.eventsFolded, 50);
          assert.equal(second.lastSeq, 300);
          assert.equal(canonicalJson(second.state), canonicalJson(await freshReplay(log)));
        } finally {
          await second.stop();
        }
      }));

    it("ignores a snapshot of another schema version (logged) and a corrupted one (not fatal)", () =>
      withLog(async (log) => {
        const events = [...fleetChurn({ nodes: 4, events: 90 })];
        await appendAll(log, events);
        const { logger, lines } = capturingLogger();
        const snaps = await store(log, logger);
        const prefix = [];
        for await (const r of log.read({ untilSeq: 30 })) prefix.push(r);
        await snaps.save(
          fleetProjection,
          { seq: 30, timeMs: prefix.at(-1)!.timeMs },
          canonicalJson(foldFleet(prefix)),
        );
        // A future version's snapshot, newer than the good one.
        await snaps.save(
          { name: "fleet", schemaVersion: 99 },
          { seq: 60, timeMs: 0 },
          '{"from":"the future"}',
        );
        // A corrupted one, newer still: its chunk does not match its digest.
        await snaps.save(fleetProjection, { seq: 80, timeMs: 0 }, canonicalJson(foldFleet(prefix)));
        const kv = (snaps as unknown as { kv: { put(k: string, v: Uint8Array): Promise<number> } }).kv;
        await kv.put(`${log.stream}.fleet.c.${String(80).padStart(15, "0")}.0`, new Uint8Array([1, 2, 3]));

        const rt = new ProjectionRuntime(log, fleetProjection, { snapshots: snaps, logger });
        try {
          await rt.start();
          assert.equal(rt.restoredFrom?.seq, 30);
          assert.equal(rt.eventsFolded, 60);
          assert.equal(canonicalJson(rt.state), canonicalJson(await freshReplay(log)));
          assert.ok(
            lines.some((l) => /ignoring snapshot of fleet at sequence 60: schema version 99/.test(l.msg)),
          );
          assert.ok(lines.some((l) => /ignoring corrupted snapshot of fleet at sequence 80/.test(l.msg)));
        } finally {
          await rt.stop();
        }
      }));

    it("writes snapshots periodically while following", () =>
      withLog(async (log) => {
        const snaps = await store(log);
        const rt = new ProjectionRuntime(log, fleetProjection, {
          snapshots: snaps,
          snapshotEvery: { events: 40, ms: 3_600_000 },
        });
        try {
          await rt.start();
          const last = await appendAll(log, fleetChurn({ nodes: 3, events: 100 }));
          await rt.waitFor(last, { timeoutMs: 20_000 });
          const deadline = Date.now() + 20_000;
          while ((await snaps.list("fleet")).length < 2) {
            assert.ok(Date.now() < deadline, "no periodic snapshots within 20 s");
            await new Promise((r) => setTimeout(r, 100));
          }
          for (const m of await snaps.list("fleet")) {
            assert.equal(m.schemaVersion, fleetProjection.schemaVersion);
            assert.ok(m.seq >= 40 && m.seq <= last);
          }
        } finally {
          await rt.stop();
        }
      }));
  });
});
