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
import { create, type MessageInitShape, toJsonString } from "@bufbuild/protobuf";
import type { Gateway } from "../../src/gateway/index.js";
import { AgentMessageSchema, ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { type Log, openLog } from "../../src/log/index.js";
import { seededRng } from "../../src/sim/rng.js";
import { type NatsServer, startServer, uniqueStream } from "../harness/nats.js";
import { assertServed, type Protocol } from "../support/agent.js";
import { makeTestCerts, type TestCerts } from "../support/certs.js";
import { rand, readAll, startTestGateway } from "../support/gateway.js";
import { assertLogHygiene } from "../support/log-hygiene.js";
import { type Codec, encode, frame, RawAgent } from "../support/raw-agent.js";
import { h100Registration } from "../support/sample-events.js";

const ITERATIONS = Number(process.env["LLMGW_FUZZ_ITERATIONS"] ?? 240);
const SEED = Number(process.env["LLMGW_FUZZ_SEED"] ?? Math.floor(Math.random() * 2 ** 31));
const PROTOCOLS: Protocol[] = ["connect", "grpc", "grpc-web"];
const NODE = "gpu-fuzz";
/** Codes a hostile stream may end with: each tells the agent what it did wrong, or that all was well. */
const ACCEPTABLE = new Set(["OK", "InvalidArgument", "ResourceExhausted", "PermissionDenied"]);

type Init = MessageInitShape<typeof AgentMessageSchema>;

/** Valid messages of every kind, the raw material of mutations. */
function corpus(): Init[] {
  return [
    {
      msg: {
        case: "register",
        value: h100Registration(NODE, [{ shard: "s1", replica: "r1", gpus: [0, 1, 2, 3] }]),
      },
    },
    { msg: { case: "heartbeat", value: { gpuMemoryUsedMb: [1n, 2n, 70_000n], newProblems: ["Xid 79"] } } },
    {
      msg: {
        case: "shard",
        value: {
          replicaId: "r1",
          shardId: "s1",
          state: ShardStatus_State.FAILED,
          error: "oom",
          exitCode: -9,
        },
      },
    },
    { msg: { case: "result", value: { commandId: "c-1", ok: false, error: "no such shard" } } },
  ];
}

class Fuzzer {
  readonly #r: () => number;
  readonly #corpus = corpus().map((m) => Buffer.from(encode(m)));
  readonly #json = corpus().map((m) =>
    Buffer.from(toJsonString(AgentMessageSchema, create(AgentMessageSchema, m))),
  );
  constructor(seed: number) {
    this.#r = seededRng(seed);
  }

  int(n: number): number {
    return Math.floor(this.#r() * n);
  }

  bytes(n: number): Buffer {
    return Buffer.from(Array.from({ length: n }, () => this.int(256)));
  }

  /** One to four byte-level mutations: flip, set, insert, delete, truncate, duplicate a slice. */
  mutate(input: Buffer): Buffer {
    let b = Buffer.from(input);
    for (let k = 1 + this.int(4); k > 0; k--) {
      const at = this.int(Math.max(1, b.length));
      switch (this.int(6)) {
        case 0:
          if (b.length > 0) b[at] = (b[at] ?? 0) ^ (1 << this.int(8));
          break;
        case 1:
          if (b.length > 0) b[at] = [0x00, 0xff, 0x7f, 0x80][this.int(4)] ?? 0;
          break;
        case 2:
          b = Buffer.concat([b.subarray(0, at), this.bytes(1 + this.int(4)), b.subarray(at)]);
          break;
        case 3:
          b = Buffer.concat([b.subarray(0, at), b.subarray(at + 1 + this.int(4))]);
          break;
        case 4:
          b = b.subarray(0, at);
          break;
        default: {
          const len = 1 + this.int(16);
          b = Buffer.concat([b.subarray(0, at), b.subarray(at, at + len), b.subarray(at)]);
        }
      }
    }
    return b;
  }

  /** A frame around `payload`; sometimes with odd flags or a length that lies. */
  frame(payload: Buffer): Buffer {
    const roll = this.int(20);
    if (roll === 0) return frame(payload, { flags: 1 + this.int(255) });
    if (roll === 1) return frame(payload, { length: this.int(2 ** 32) });
    if (roll === 2) return frame(payload, { length: payload.length + 1 + this.int(64) });
    return frame(payload);
  }

  /** JSON the decoder must refuse or take: mutated messages, and values no schema allows. */
  json(): Buffer {
    const nest = (n: number) => `${"[".repeat(n)}${"]".repeat(n)}`;
    const hostile = [
      `{"register":{"nodeId":"${NODE}","gpus":${nest(20_000)}}}`,
      `{"register":{"nodeId":"${NODE}","gpus":[{"index":1e30}]}}`,
      `{"register":{"nodeId":"${NODE}","gpus":[{"index":-1,"memoryTotalMb":"99999999999999999999999"}]}}`,
      `{"register":{"nodeId":"${NODE}","labels":{"__proto__":{"polluted":"yes"},"constructor":"x"}}}`,
      `{"register":{"nodeId":"${NODE}"},"heartbeat":{}}`,
      `{"shard":{"state":"STATE_FROM_THE_FUTURE"}}`,
      `{"register":{"nodeId":"${NODE}","extra":true}}`,
    ];
    if (this.int(3) === 0) return Buffer.from(hostile[this.int(hostile.length)] ?? "");
    return this.mutate(this.#json[this.int(this.#json.length)] ?? Buffer.alloc(0));
  }

  /** One request body and what it is, for the failure message. */
  next(): { what: string; body: Buffer; codec: Codec } {
    if (this.int(6) === 0) {
      const first = this.int(2) === 0 ? [frame(this.#json[0] ?? Buffer.alloc(0))] : [];
      return {
        what: "protobuf JSON",
        body: Buffer.concat([...first, this.frame(this.json())]),
        codec: "json",
      };
    }
    return { ...this.#proto(), codec: "proto" };
  }

  #proto(): { what: string; body: Buffer } {
    const valid = (i: number) => this.#corpus[i] ?? Buffer.alloc(0);
    switch (this.int(5)) {
      case 0:
        return { what: "random bytes", body: this.bytes(this.int(200)) };
      case 1:
        return { what: "a random frame", body: frame(this.bytes(this.int(300))) };
      case 2:
        return { what: "a mutated registration", body: this.frame(this.mutate(valid(0))) };
      case 3:
        return { what: "a mutated message first", body: this.frame(this.mutate(valid(this.int(4)))) };
      default: {
        const parts = [frame(valid(0))];
        for (let k = 1 + this.int(4); k > 0; k--) {
          const m = valid(this.int(4));
          parts.push(this.int(3) === 0 ? frame(m) : this.frame(this.mutate(m)));
        }
        return { what: "a registration, then mutated messages", body: Buffer.concat(parts) };
      }
    }
  }
}

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
    const fuzz = new Fuzzer(SEED);
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
