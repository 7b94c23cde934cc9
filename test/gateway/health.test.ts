/**
 * grpc.health.v1.Health served by a real `llmgw gateway` process on its
 * agent port (mTLS), called over gRPC by a real client: SERVING once it is
 * connected to NATS, NOT_SERVING while NATS is gone and while it drains
 * (SIGTERM), SERVING again when NATS is back; Watch streams each change;
 * an unknown service is NotFound for Check, SERVICE_UNKNOWN for Watch.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import {
  Health,
  type HealthCheckResponse,
  HealthCheckResponse_ServingStatus as S,
} from "../../src/gen/grpc/health/v1/health_pb.js";
import { startServer, uniqueStream } from "../harness/nats.js";
import { makeTestCerts } from "../support/certs.js";
import { eventually } from "../support/eventually.js";
import { type GatewayProcess, gatewayArgs, rand, spawnGateway } from "../support/gateway.js";

describe("grpc.health.v1 on the gateway's agent port (real gateway process, real nats-server)", () => {
  let server: Awaited<ReturnType<typeof startServer>>;
  let gw: GatewayProcess;
  let sessions: Http2SessionManager;
  const certs = makeTestCerts();

  before(async () => {
    server = await startServer();
    gw = await spawnGateway(
      gatewayArgs({
        id: `gw-health-${rand()}`,
        nats: server.url,
        stream: uniqueStream("HEALTH"),
        prefix: `health${rand()}.evt`,
        metricsListen: false,
      }),
      certs,
    );
    const client = certs.client("health-checker");
    sessions = new Http2SessionManager(gw.url, {}, { ca: certs.ca, cert: client.cert, key: client.key });
  });
  after(async () => {
    sessions?.abort();
    gw?.proc.kill("SIGKILL");
    await server?.close();
  });

  const health = () =>
    createClient(Health, createGrpcTransport({ baseUrl: gw.url, sessionManager: sessions }));

  it("Check: SERVING when connected, NotFound for a service it does not have", async () => {
    assert.equal((await health().check({ service: "" })).status, S.SERVING);
    assert.equal((await health().check({ service: "llmgw.v1.AgentService" })).status, S.SERVING);
    await assert.rejects(
      health().check({ service: "no.such.Service" }),
      (e: unknown) => e instanceof ConnectError && e.code === Code.NotFound,
    );
  });

  it("Watch: SERVICE_UNKNOWN for an unknown service", async () => {
    const abort = new AbortController();
    for await (const r of health().watch({ service: "no.such.Service" }, { signal: abort.signal })) {
      assert.equal(r.status, S.SERVICE_UNKNOWN);
      break;
    }
    abort.abort();
  });

  it("Watch: NOT_SERVING while NATS is gone, SERVING when back, NOT_SERVING while draining", async () => {
    const seen: S[] = [];
    const abort = new AbortController();
    const watching = (async () => {
      try {
        for await (const r of health().watch(
          { service: "" },
          { signal: abort.signal },
        ) as AsyncIterable<HealthCheckResponse>) {
          seen.push(r.status);
        }
      } catch {
        // The stream ends with the gateway.
      }
    })();
    await eventually(() => seen.length === 1, { what: "the first Watch answer", timeoutMs: 10_000 });
    assert.deepEqual(seen, [S.SERVING]);

    await server.stop();
    await eventually(() => seen.at(-1) === S.NOT_SERVING, {
      what: "NOT_SERVING without NATS",
      timeoutMs: 30_000,
    });
    assert.equal((await health().check({ service: "" })).status, S.NOT_SERVING);

    await server.restart();
    await eventually(() => seen.at(-1) === S.SERVING, { what: "SERVING with NATS back", timeoutMs: 60_000 });

    gw.proc.kill("SIGTERM");
    await eventually(() => seen.at(-1) === S.NOT_SERVING, {
      what: "NOT_SERVING while draining",
      timeoutMs: 30_000,
    });
    await gw.exited;
    abort.abort();
    await watching;
    assert.deepEqual(seen, [S.SERVING, S.NOT_SERVING, S.SERVING, S.NOT_SERVING]);
  });
});
