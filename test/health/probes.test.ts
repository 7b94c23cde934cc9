/**
 * The probes deploy/kubernetes points at, against real processes and a real
 * nats-server: `/readyz` and `/livez` on the `--metrics-listen` of `llmgw
 * reconciler` and `llmgw gateway`. The reconciler is ready only once its
 * projection has folded the log up to its end (the sequence it reports is
 * the log's), the gateway once it serves and is connected; neither is
 * ready while NATS is gone, both again once it is back, and `/livez`
 * answers throughout (the event loop runs).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { clone } from "@bufbuild/protobuf";
import { EventSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import { type Log, openLog } from "../../src/log/index.js";
import { type NatsServer, startServer, uniqueStream } from "../harness/nats.js";
import { makeTestCerts } from "../support/certs.js";
import { eventually } from "../support/eventually.js";
import { type GatewayProcess, gatewayArgs, rand, spawnGateway } from "../support/gateway.js";
import { killAll, type ReconcilerProcess, spawnReconciler } from "../support/reconciler.js";
import { sampleEvents } from "../support/sample-events.js";

interface Probe {
  status: number;
  body: { status?: string; reason?: string; seq?: number };
}

async function probe(base: string, path: "/readyz" | "/livez"): Promise<Probe> {
  const res = await fetch(`${base}${path}`, { signal: AbortSignal.timeout(5000) });
  return { status: res.status, body: (await res.json()) as Probe["body"] };
}

/**
 * Stops NATS and waits for `base`'s readiness to fail (liveness does not
 * depend on NATS); resolves with the not-ready answer once NATS is back and
 * the process ready again.
 */
async function notReadyWhileNatsIsGone(server: NatsServer, base: string, who: string): Promise<Probe> {
  await server.stop();
  let down: Probe | undefined;
  await eventually(
    async () => {
      down = await probe(base, "/readyz");
      return down.status === 503;
    },
    { what: `${who} not ready without NATS`, timeoutMs: 30_000 },
  );
  assert.equal((await probe(base, "/livez")).status, 200, "liveness does not depend on NATS");
  await server.restart();
  await eventually(async () => (await probe(base, "/readyz")).status === 200, {
    what: `${who} ready again once NATS is back`,
    timeoutMs: 60_000,
  });
  return down!;
}

/** Appends the sample events again under fresh ids; resolves with the log's last sequence. */
async function appendBatch(log: Log, tag: string): Promise<number> {
  for (const e of sampleEvents()) {
    const copy = clone(EventSchema, e);
    copy.id = `${e.id}-${tag}`;
    await log.append(copy);
  }
  return log.lastSeq();
}

describe("readiness and liveness probes of real processes (real nats-server)", () => {
  let server: Awaited<ReturnType<typeof startServer>>;
  let log: Log;
  const stream = uniqueStream("PROBE");
  const prefix = `probe${rand()}.evt`;
  let reconciler: ReconcilerProcess | undefined;
  let gateway: GatewayProcess | undefined;

  before(async () => {
    server = await startServer();
    log = await openLog({ url: server.url, clientName: "test", name: stream, prefix });
  });
  after(async () => {
    await killAll([reconciler]);
    gateway?.proc.kill("SIGKILL");
    await log?.close().catch(() => {});
    await server?.close();
  });

  it("the reconciler is ready only when caught up with the log, and not while NATS is gone", async () => {
    const before = await appendBatch(log, "a");
    assert.ok(before > 5);
    reconciler = await spawnReconciler({
      id: `rec-${rand()}`,
      nats: server.url,
      stream,
      prefix,
      leaseBucket: `leases_${rand()}`,
      gatewaysBucket: `gateways_${rand()}`,
    });
    const line = reconciler.lines.find((l) => l.msg === "metrics listening");
    const base = `http://${String(line?.["metrics"])}`;
    let ready = await probe(base, "/readyz");
    await eventually(
      async () => {
        ready = await probe(base, "/readyz");
        return ready.status === 200;
      },
      { what: "the reconciler to be ready", timeoutMs: 30_000 },
    );
    // Ready means folded up to the end of the log as it was.
    assert.ok((ready.body.seq ?? 0) >= before, `ready at ${ready.body.seq}, the log ends at ${before}`);
    // More events: ready again only at the new end (the reconciler's own passes may add more).
    const later = await appendBatch(log, "b");
    await eventually(
      async () => {
        const r = await probe(base, "/readyz");
        return r.status === 200 && (r.body.seq ?? 0) >= later;
      },
      { what: `the reconciler ready at sequence ${later}`, timeoutMs: 30_000 },
    );
    assert.equal((await probe(base, "/livez")).status, 200);

    const down = await notReadyWhileNatsIsGone(server, base, "the reconciler");
    assert.equal(down.body.status, "not-ready");
    assert.match(down.body.reason ?? "", /NATS|log/);
    await killAll([reconciler]);
    reconciler = undefined;
  });

  it("the gateway is ready once serving and connected, and not while NATS is gone", async () => {
    gateway = await spawnGateway(
      gatewayArgs({ id: `gw-probe-${rand()}`, nats: server.url, stream, prefix }),
      makeTestCerts(),
    );
    assert.ok(gateway.metricsUrl, gateway.output());
    const base = gateway.metricsUrl.replace(/\/metrics$/, "");
    const ready = await probe(base, "/readyz");
    assert.equal(ready.status, 200, JSON.stringify(ready.body));
    assert.equal((await probe(base, "/livez")).status, 200);

    const down = await notReadyWhileNatsIsGone(server, base, "the gateway");
    assert.equal(down.body.reason, "not connected to NATS");
  });
});
