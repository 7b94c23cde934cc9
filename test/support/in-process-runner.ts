/**
 * The reconciler's runner in the test's own process, for tests of the
 * runner itself: leader "rec-a" on a lease bucket of its own (3 s TTL),
 * with no gateways and a silent logger.
 */
import { pino } from "pino";
import type { FleetState } from "../../src/projections/index.js";
import type { ProjectionRuntime } from "../../src/projections/runtime/index.js";
import {
  type GatewaySet,
  Lease,
  ReconcilerRunner,
  type RunnerOptions,
} from "../../src/reconciler/runner/index.js";
import { uniqueStream } from "../harness/nats.js";

const noGateways: GatewaySet = { ids: new Set(), onChange: () => () => {} };

/**
 * Starts `rt` (the projection of `o.log`), builds a runner over `o.log`
 * deciding with `o.decide` and hands it to `body`, which starts it. The
 * runner, `rt`, the log's stream and the log go whatever happens.
 */
export async function withInProcessRunner<C>(
  rt: ProjectionRuntime<FleetState>,
  o: Omit<RunnerOptions<C>, "id" | "lease" | "gateways" | "logger">,
  body: (runner: ReconcilerRunner<C>) => Promise<void>,
): Promise<void> {
  let runner: ReconcilerRunner<C> | undefined;
  try {
    await rt.start();
    const lease = await Lease.open(o.log.js, {
      bucket: `leases_${uniqueStream()}`,
      key: "reconciler",
      holderId: "rec-a",
      ttlMs: 3000,
    });
    runner = new ReconcilerRunner({
      ...o,
      id: "rec-a",
      lease,
      gateways: noGateways,
      logger: pino({ level: "silent" }),
    });
    await body(runner);
  } finally {
    await runner?.stop();
    await rt.stop();
    await o.log.jsm.streams.delete(o.log.stream).catch(() => {});
    await o.log.close();
  }
}
