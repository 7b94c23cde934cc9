/**
 * A rolling upgrade on one log: the previous release's `llmgw gateway` ×2
 * and `llmgw reconciler` (built from a pinned commit of this repository,
 * test/support/old-release.ts) run a simulated fleet; then, while the
 * agents keep running and the catalog changes, a current reconciler joins
 * as a follower, each gateway in turn is stopped (it drains, its agents move
 * to the other) and the current version started in its place, and the old
 * reconciler is stopped so the current one takes the lease. The fleet
 * converges at every step, and the whole log, written by both versions,
 * keeps every invariant (`llmgw check-log`, with the agents' acks).
 *
 * The previous release's snapshot (fleet schema 9, written by its own code
 * into the bucket the current reconciler reads) is ignored, not misread: the
 * current reconciler says so and folds the log from the start, a current
 * runtime on that bucket equals a fresh fold, and the snapshot it writes
 * then (current schema) is the one the next runtime loads.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  canonicalJson,
  FLEET_SCHEMA_VERSION,
  type FleetState,
  fleetProjection,
  foldFleet,
} from "../../src/projections/index.js";
import { openKvSnapshotStore, ProjectionRuntime } from "../../src/projections/runtime/index.js";
import { type NatsServer, startServer, tempDir } from "../harness/nats.js";
import { ChaosWorld } from "../support/chaos.js";
import { runCli } from "../support/cli.js";
import { eventually } from "../support/eventually.js";
import { type ExportedRelease, exportRelease, PREVIOUS_RELEASE } from "../support/old-release.js";

const NODES = 4;

/** Run inside the previous release, with its own code: a snapshot of the log as it folds it. */
const OLD_SNAPSHOT = `
import { openLog } from "./src/log/index.js";
import { canonicalJson, fleetProjection } from "./src/projections/index.js";
import { openKvSnapshotStore, replay } from "./src/projections/runtime/index.js";
const [url, name, prefix, bucket] = process.argv.slice(2);
const log = await openLog({ url, clientName: "old-snapshot", name, prefix, ensure: false });
const store = await openKvSnapshotStore(log, { bucket });
const r = await replay(log, fleetProjection);
await store.save(fleetProjection, { seq: r.seq, timeMs: r.timeMs }, canonicalJson(r.state));
console.log(JSON.stringify({ seq: r.seq, schemaVersion: fleetProjection.schemaVersion }));
await log.close();
`;

describe("rolling upgrade from the previous release on one log", () => {
  let server: NatsServer & { close(): Promise<void> };
  let old: ExportedRelease;
  let w: ChaosWorld;
  let replicas = 4;

  before(async () => {
    old = exportRelease(PREVIOUS_RELEASE.commit);
    server = await startServer();
    // Assigned before start(), so `after` closes whatever did start.
    w = new ChaosWorld({ nats: server.url, gateways: 2, reconcilers: 1, bin: old.bin });
    await w.start();
  });
  after(async () => {
    await w?.close();
    await server?.close();
    old?.remove();
  });

  it("old gateways and reconciler → current ones, one at a time, agents running: converged and clean", async () => {
    const [gw1, gw2] = w.gateways as [(typeof w.gateways)[0], (typeof w.gateways)[0]];
    const [oldRec] = w.reconcilers;
    assert.ok(gw1 && gw2 && oldRec);

    // The previous release alone runs the fleet.
    await w.addAgents(NODES, "gpu-");
    await w.waitConnected(NODES);
    await w.catalog(replicas);
    await w.waitRunning(replicas);
    assert.ok(await oldRec.isLeader(), `the previous release's reconciler leads:\n${oldRec.output()}`);

    // Its snapshot, written by its own code, in the bucket the current reconciler will read.
    const snapshotBucket = `snap_${w.tag}`;
    const script = join(old.dir, "write-old-snapshot.ts");
    writeFileSync(script, OLD_SNAPSHOT);
    const wrote = JSON.parse(
      execFileSync(
        process.execPath,
        ["--import", "tsx", script, server.url, w.stream, w.prefix, snapshotBucket],
        {
          cwd: old.dir,
        },
      )
        .toString()
        .trim()
        .split("\n")
        .at(-1)!,
    ) as { seq: number; schemaVersion: number };
    assert.equal(wrote.schemaVersion, PREVIOUS_RELEASE.fleetSchemaVersion);
    assert.ok(wrote.schemaVersion < FLEET_SCHEMA_VERSION);

    // A current reconciler joins: it follows (the old one holds the lease) and skips the old snapshot.
    const newRec = await w.addReconciler({ snapshotBucket });
    await eventually(
      () =>
        newRec.logged(
          new RegExp(
            `ignoring snapshot of fleet at sequence ${wrote.seq}: schema version ${wrote.schemaVersion}, this version reads ${FLEET_SCHEMA_VERSION}`,
          ),
        ),
      {
        what: `the current reconciler to ignore the schema ${wrote.schemaVersion} snapshot:\n${newRec.output()}`,
      },
    );
    assert.equal(
      await newRec.isLeader(),
      false,
      "the current reconciler follows while the old one holds the lease",
    );

    // Gateways one at a time, with work for the fleet while the versions are mixed.
    await w.replaceGateway(gw1, undefined);
    replicas += 1;
    await w.catalog(replicas);
    await w.waitConnected(NODES);
    await w.waitRunning(replicas);
    await w.replaceGateway(gw2, undefined);
    await w.waitConnected(NODES);

    // The old reconciler stops as an operator would; the current one takes the lease.
    oldRec.signal("SIGTERM");
    await oldRec.exited;
    await eventually(async () => await newRec.isLeader(), {
      what: `the current reconciler to take the lease:\n${newRec.output()}`,
    });
    replicas += 1;
    await w.catalog(replicas);
    await w.waitConnected(NODES);
    await w.waitRunning(replicas);
    assert.ok(
      w.gateways.every((g) => g.bin === undefined && g.child.proc.exitCode === null),
      "both gateways run the current version",
    );

    // Both versions wrote to it: passes by each reconciler, and each gateway started twice.
    const passesBy = new Map<string, number>();
    const starts = new Map<string, number>();
    for await (const r of w.log.read()) {
      const b = r.event.body;
      if (b.case === "reconcilePass") {
        const id = r.event.writer?.id ?? "";
        passesBy.set(id, (passesBy.get(id) ?? 0) + 1);
      } else if (b.case === "gatewayStarted")
        starts.set(b.value.gatewayId, (starts.get(b.value.gatewayId) ?? 0) + 1);
    }
    assert.ok(
      (passesBy.get(oldRec.id) ?? 0) > 0 && (passesBy.get(newRec.id) ?? 0) > 0,
      JSON.stringify([...passesBy]),
    );
    assert.deepEqual([starts.get(gw1.id), starts.get(gw2.id)], [2, 2]);

    // The whole log, written by both versions: every invariant, with the agents' acks.
    await w.check("a rolling upgrade from the previous release");
    const acked = join(tempDir("upgrade-check"), "acked.jsonl");
    writeFileSync(acked, w.acked.map((a) => JSON.stringify(a)).join("\n"));
    const checked = await runCli(
      [
        "check-log",
        "--nats",
        server.url,
        "--stream",
        w.stream,
        "--subject-prefix",
        w.prefix,
        "--acked",
        acked,
      ],
      { timeoutMs: 120_000 },
    );
    assert.equal(checked.code, 0, checked.stdout + checked.stderr);
    assert.match(checked.stdout, /every invariant holds/);

    // The old snapshot is never what a current runtime starts from: it folds the log and equals a fresh fold.
    const store = await openKvSnapshotStore<FleetState>(w.log, { bucket: snapshotBucket, create: false });
    assert.ok(store, "the snapshot bucket exists");
    const foldUpTo = async (untilSeq: number) => {
      const records = [];
      for await (const r of w.log.read({ untilSeq })) records.push(r);
      return foldFleet(records);
    };
    const rt = new ProjectionRuntime(w.log, fleetProjection, { snapshots: store });
    try {
      await rt.start();
      assert.equal(rt.restoredFrom, undefined, "a schema 9 snapshot was loaded by schema 10 code");
      assert.equal(canonicalJson(rt.state), canonicalJson(await foldUpTo(rt.lastSeq)));
      // Rebuilt: the next snapshot has the current schema, and that one is loaded.
      const rebuilt = await rt.snapshotNow();
      assert.equal(rebuilt?.schemaVersion, FLEET_SCHEMA_VERSION);
      const again = new ProjectionRuntime(w.log, fleetProjection, { snapshots: store });
      try {
        await again.start();
        assert.equal(again.restoredFrom?.seq, rebuilt?.seq);
        assert.equal(canonicalJson(again.state), canonicalJson(await foldUpTo(again.lastSeq)));
      } finally {
        await again.stop();
      }
    } finally {
      await rt.stop();
    }
  });
});
