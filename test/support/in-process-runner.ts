/**
 * The reconciler's runner in the test's own process, for tests of the
 * runner itself: leader "rec-a" on a lease bucket of its own (3 s TTL),
 * with no gateways and a silent logger. The caller starts and stops it.
 */
import { pino } from "pino";
import {
  type GatewaySet,
  Lease,
  ReconcilerRunner,
  type RunnerOptions,
} from "../../src/reconciler/runner/index.js";
import { uniqueStream } from "../harness/nats.js";

const noGateways: GatewaySet = { ids: new Set(), onChange: () => () => {} };

/** A runner over `o.log` deciding with `o.decide`; the lease, the gateways and the logger are the test's defaults. */
export async function inProcessRunner<C>(
  o: Omit<RunnerOptions<C>, "id" | "lease" | "gateways" | "logger">,
): Promise<ReconcilerRunner<C>> {
  const lease = await Lease.open(o.log.js, {
    bucket: `leases_${uniqueStream()}`,
    key: "reconciler",
    holderId: "rec-a",
    ttlMs: 3000,
  });
  return new ReconcilerRunner({
    ...o,
    id: "rec-a",
    lease,
    gateways: noGateways,
    logger: pino({ level: "silent" }),
  });
}
