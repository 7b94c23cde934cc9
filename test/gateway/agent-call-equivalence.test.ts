/**
 * The gateway frames binary gRPC and Connect agent streams itself
 * (src/gateway/agent-call) and leaves the rest to Connect's handler. An
 * agent must not be able to tell the two apart: the same seeded streams of
 * random bytes, random frames and mutated messages, sent to one gateway
 * that frames them directly and to one that leaves everything to Connect's
 * handler, must end with the same code and message and carry the same
 * replies. Each gateway has a log of its own on one real nats-server.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type NatsServer, startServer } from "../harness/nats.js";
import type { Protocol } from "../support/agent.js";
import { Fuzzer } from "../support/agent-fuzzer.js";
import { makeTestCerts, type TestCerts } from "../support/certs.js";
import { RawAgent, type RawResult } from "../support/raw-agent.js";
import { type GatewayOnLog, startGatewayOnNewLog } from "../support/suites.js";

const STREAMS = Number(process.env["LLMGW_FUZZ_ITERATIONS"] ?? 120);
const SEED = Number(process.env["LLMGW_FUZZ_SEED"] ?? Math.floor(Math.random() * 2 ** 31));
const PROTOCOLS: Protocol[] = ["connect", "grpc"];
const NODE = "gpu-same";
/**
 * [seed, streams]: 28987469's stream 41 is a valid Register, then a
 * re-registration listing a GPU twice; framed directly, the register's ack
 * was dropped by the error that followed it.
 */
const REGRESSIONS: ReadonlyArray<[number, number]> = [[28987469, 42]];

describe("gateway: agent streams framed directly answer as Connect's handler does", () => {
  let server: NatsServer & { close(): Promise<void> };
  let certs: TestCerts;
  const gateways: GatewayOnLog[] = [];

  before(async () => {
    server = await startServer();
    certs = makeTestCerts();
    for (const directStreams of [true, false]) {
      gateways.push(
        await startGatewayOnNewLog(server.url, "GWSAME", {
          certs,
          registrationTimeoutMs: 2_000,
          readMaxBytes: 64 * 1024,
          directStreams,
        }),
      );
    }
  });
  after(async () => {
    for (const g of gateways) await g.close();
    await server?.close();
  });

  it(`gives the same answer to the same stream either way (${STREAMS} streams)`, async (t) => {
    const codes = await compare(SEED, STREAMS);
    t.diagnostic(`seed ${SEED}: ${[...codes].map(([c, n]) => `${c} ${n}`).join(", ")}`);
    assert.ok((codes.get("InvalidArgument") ?? 0) > 0, `seed ${SEED}: ${JSON.stringify([...codes])}`);
    assert.ok((codes.get("OK") ?? 0) > 0, `seed ${SEED}: ${JSON.stringify([...codes])}`);
  });

  // Seeds that once told the two apart, each up to the stream that did.
  for (const [seed, streams] of REGRESSIONS) {
    it(`seed ${seed}: the same ${streams} streams, either way`, async () => {
      await compare(seed, streams);
    });
  }

  /** Sends the same `streams` streams of `seed` to both gateways; the codes they ended with. */
  async function compare(seed: number, streams: number): Promise<Map<string, number>> {
    const [direct, connect] = gateways.map(
      ({ gw }) => new RawAgent(gw.url, { ca: certs.ca, ...certs.client(NODE) }),
    ) as [RawAgent, RawAgent];
    // Both gateways see the same streams in the same order, so their
    // sessions (numbered per gateway) and their answers line up.
    const fuzz = new Fuzzer(seed, NODE);
    const codes = new Map<string, number>();
    try {
      for (let i = 0; i < streams; i++) {
        const protocol = PROTOCOLS[i % PROTOCOLS.length] ?? "connect";
        const { what, body, codec } = fuzz.next();
        const replay = `rerun with LLMGW_FUZZ_SEED=${seed}: stream ${i} (${protocol}, ${what}, ${body.length} bytes: ${body.subarray(0, 48).toString("hex")}…)`;
        const [a, b] = await Promise.all([
          direct.call(protocol, body, 10_000, codec),
          connect.call(protocol, body, 10_000, codec),
        ]);
        assert.deepEqual(summary(a), summary(b), `${replay}: framed directly, then by Connect's handler`);
        codes.set(a.code, (codes.get(a.code) ?? 0) + 1);
      }
    } finally {
      direct.close();
      connect.close();
    }
    return codes;
  }
});

/** What an agent sees of a call: how it ended and the kinds of replies (session ids differ between the gateways). */
function summary(r: RawResult) {
  return {
    code: r.code,
    message: r.message.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<uuid>"),
    replies: r.messages.map((m) => (m.msg.case === "ack" ? `ack ${m.msg.value.messageId}` : m.msg.case)),
  };
}
