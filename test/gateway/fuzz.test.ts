/**
 * Seeded fuzzing of the agent stream: random bytes, random frames, mutated
 * valid messages and valid registrations followed by mutated messages, in
 * Connect, gRPC and gRPC-Web, over one mTLS HTTP/2 connection to a real
 * gateway on a real nats-server. Every stream must end with a code an agent
 * can act on (never Internal or a hang), a well-behaved agent must still be
 * served, and the log may hold only well-formed events of the fuzzing node.
 *
 * LLMGW_FUZZ_SEED replays a run (the seed is printed on failure);
 * LLMGW_FUZZ_ITERATIONS runs longer than the suite's short default.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Gateway } from "../../src/gateway/index.js";
import { type Log, openLog } from "../../src/log/index.js";
import { type NatsServer, startServer, uniqueStream } from "../harness/nats.js";
import { assertServed, type Protocol } from "../support/agent.js";
import { Fuzzer } from "../support/agent-fuzzer.js";
import { makeTestCerts, type TestCerts } from "../support/certs.js";
import { rand, readAll, startTestGateway } from "../support/gateway.js";
import { assertLogHygiene } from "../support/log-hygiene.js";
import { RawAgent } from "../support/raw-agent.js";
import { h100Registration } from "../support/sample-events.js";

const ITERATIONS = Number(process.env["LLMGW_FUZZ_ITERATIONS"] ?? 240);
const SEED = Number(process.env["LLMGW_FUZZ_SEED"] ?? Math.floor(Math.random() * 2 ** 31));
const PROTOCOLS: Protocol[] = ["connect", "grpc", "grpc-web"];
const NODE = "gpu-fuzz";
/** Codes a hostile stream may end with: each tells the agent what it did wrong, or that all was well. */
const ACCEPTABLE = new Set(["OK", "InvalidArgument", "ResourceExhausted", "PermissionDenied"]);

describe("gateway: seeded fuzzing through real streams", () => {
  let server: NatsServer & { close(): Promise<void> };
  let certs: TestCerts;
  let gw: Gateway;
  let log: Log;
  let stream: string;
  let prefix: string;

  before(async () => {
    server = await startServer();
    certs = makeTestCerts();
    stream = uniqueStream("GWFUZZ");
    prefix = `t${rand()}.evt`;
    log = await openLog({ url: server.url, clientName: "test", name: stream, prefix });
    gw = await startTestGateway({
      nats: server.url,
      stream,
      prefix,
      certs,
      registrationTimeoutMs: 2_000,
      readMaxBytes: 64 * 1024,
    });
  });
  after(async () => {
    await gw?.drain("test over");
    await log?.jsm.streams.delete(stream).catch(() => {});
    await log?.close();
    await server?.close();
  });

  it(`ends every fuzzed stream with a code an agent can act on (${ITERATIONS} streams)`, async (t) => {
    const fuzz = new Fuzzer(SEED, NODE);
    const raw = new RawAgent(gw.url, { ca: certs.ca, ...certs.client(NODE) });
    const seen = new Map<string, number>();
    try {
      for (let i = 0; i < ITERATIONS; i++) {
        const protocol = PROTOCOLS[i % PROTOCOLS.length] ?? "connect";
        const { what, body, codec } = fuzz.next();
        const replay = `rerun with LLMGW_FUZZ_SEED=${SEED}: stream ${i} (${protocol}, ${what}, ${body.length} bytes: ${body.subarray(0, 48).toString("hex")}…)`;
        let code: string;
        let message: string;
        try {
          ({ code, message } = await raw.call(protocol, body, 10_000, codec));
        } catch (err) {
          throw new Error(`${replay}: ${(err as Error).message}`);
        }
        assert.ok(ACCEPTABLE.has(code), `${replay}: ended with ${code}: ${message}`);
        seen.set(code, (seen.get(code) ?? 0) + 1);
      }
    } finally {
      raw.close();
    }
    t.diagnostic(`seed ${SEED}: ${[...seen].map(([c, n]) => `${c} ${n}`).join(", ")}`);
    // Fuzzing that never got past the decoder, or never got in, would prove little.
    assert.ok((seen.get("InvalidArgument") ?? 0) > 0, `seed ${SEED}: ${JSON.stringify([...seen])}`);
    assert.ok((seen.get("OK") ?? 0) > 0, `seed ${SEED}: ${JSON.stringify([...seen])}`);
  });

  it("still serves a well-behaved agent, and the log holds only well-formed events of the fuzzing node", async () => {
    const node = "gpu-good";
    await assertServed({
      baseUrl: gw.url,
      tls: { ca: certs.ca, ...certs.client(node) },
      registration: h100Registration(node),
    });
    // readAll decodes every message: a malformed one fails here.
    const records = await readAll(log);
    assertLogHygiene(records, prefix, (n) => n === NODE || n === node);
    const opened = records.filter((r) => r.event.body.case === "sessionOpened").length;
    const closed = records.filter((r) => r.event.body.case === "sessionClosed").length;
    assert.equal(closed, opened, `seed ${SEED}: every session opened was closed`);
  });
});
