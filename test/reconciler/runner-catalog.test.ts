/**
 * The runner in-process against a real nats-server with the real decide: a
 * new catalog is acted on at once (trigger "catalog"), while the fleet's own
 * events wait for the debounce. The debounce here is a minute, so a pass
 * within the test's wait can only be the catalog's own.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type Log, openLog } from "../../src/log/index.js";
import { type FleetState, fleetProjection } from "../../src/projections/index.js";
import { ProjectionRuntime } from "../../src/projections/runtime/index.js";
import { DEFAULT_RECONCILER_CONFIG, decide } from "../../src/reconciler/index.js";
import { type NatsServer, startServer, uniqueStream } from "../harness/nats.js";
import { eventually } from "../support/eventually.js";
import { EventFactory, llamaCatalog } from "../support/fleet-events.js";
import { withInProcessRunner } from "../support/in-process-runner.js";

const MINUTE = 60_000;

async function passes(log: Log) {
  const out: Array<{ seq: number; trigger: string; kinds: string[] }> = [];
  for await (const r of log.read({ subjects: [log.subjects.reconciler] })) {
    if (r.event.body.case === "reconcilePass")
      out.push({
        seq: r.seq,
        trigger: r.event.body.value.trigger,
        kinds: r.event.body.value.decisions.map((d) => d.kind.case ?? ""),
      });
  }
  return out;
}

/** The first pass after `seq`, waited for well within the debounce. */
async function passAfter(log: Log, seq: number) {
  let found: Awaited<ReturnType<typeof passes>>[number] | undefined;
  await eventually(
    async () => {
      found = (await passes(log)).find((p) => p.seq > seq);
      return found !== undefined;
    },
    { what: `a pass after sequence ${seq}`, timeoutMs: 20_000 },
  );
  return found!;
}

describe("reconciler runner: a new catalog is acted on at once", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("appends the catalog's pass without waiting for the debounce; the fleet's events still wait for it", async () => {
    const log = await openLog({ url: server.url, clientName: "test", name: uniqueStream("CATALOG") });
    const rt = new ProjectionRuntime<FleetState>(log, fleetProjection);
    const f = new EventFactory("catalog-now");
    await withInProcessRunner(
      rt,
      {
        log,
        projection: rt,
        decide,
        config: DEFAULT_RECONCILER_CONFIG,
        triggers: { debounceMs: MINUTE, maxDelayMs: MINUTE, tickMs: MINUTE },
      },
      async (runner) => {
        runner.start();
        await eventually(() => runner.leading, { what: "rec-a leading" });

        // The catalog's pass: its replicas created (and pending: there are no nodes).
        const first = await log.append(f.catalog(llamaCatalog(2, 0)));
        const firstPass = await passAfter(log, first.seq);
        assert.equal(firstPass.trigger, "catalog");
        assert.equal(firstPass.kinds.filter((k) => k === "replicaCreated").length, 2, firstPass.kinds.join());

        // The fleet's own news (a node registering) is debounced; a new catalog after it is not.
        await log.append(f.sessionOpened("gpu-a1", "s-1", "gw-1"));
        const second = await log.append(f.catalog(llamaCatalog(3, 0)));
        const secondPass = await passAfter(log, second.seq);
        assert.equal(secondPass.trigger, "catalog");
        assert.deepEqual(
          (await passes(log)).filter((p) => p.trigger === "events"),
          [],
          "no pass for the fleet's events: their debounce (a minute) has not run out",
        );
      },
    );
  });
});
