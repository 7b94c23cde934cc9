/**
 * A seeded fuzzer of an agent's messages: random bytes, random frames,
 * mutated valid messages and hostile protobuf JSON. Shared by the fuzzing of
 * real streams (test/gateway/fuzz.test.ts) and of the pure session core
 * (test/gateway/session-core.test.ts).
 */
import { create, type MessageInitShape, toJsonString } from "@bufbuild/protobuf";
import { AgentMessageSchema, ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { seededRng } from "../../src/sim/rng.js";
import { type Codec, encode, frame } from "./raw-agent.js";
import { h100Registration } from "./sample-events.js";

export type Init = MessageInitShape<typeof AgentMessageSchema>;

/** Valid messages of every kind, the raw material of mutations. */
export function corpus(node: string): Init[] {
  return [
    {
      msg: {
        case: "register",
        value: h100Registration(node, [{ shard: "s1", replica: "r1", gpus: [0, 1, 2, 3] }]),
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

export class Fuzzer {
  readonly #r: () => number;
  readonly #node: string;
  readonly #corpus: Buffer[];
  readonly #json: Buffer[];
  /** Fuzzes the messages of node `node`, replayably from `seed`. */
  constructor(seed: number, node: string) {
    this.#r = seededRng(seed);
    this.#node = node;
    this.#corpus = corpus(node).map((m) => Buffer.from(encode(m)));
    this.#json = corpus(node).map((m) =>
      Buffer.from(toJsonString(AgentMessageSchema, create(AgentMessageSchema, m))),
    );
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
      `{"register":{"nodeId":"${this.#node}","gpus":${nest(20_000)}}}`,
      `{"register":{"nodeId":"${this.#node}","gpus":[{"index":1e30}]}}`,
      `{"register":{"nodeId":"${this.#node}","gpus":[{"index":-1,"memoryTotalMb":"99999999999999999999999"}]}}`,
      `{"register":{"nodeId":"${this.#node}","labels":{"__proto__":{"polluted":"yes"},"constructor":"x"}}}`,
      `{"register":{"nodeId":"${this.#node}"},"heartbeat":{}}`,
      `{"shard":{"state":"STATE_FROM_THE_FUTURE"}}`,
      `{"register":{"nodeId":"${this.#node}","extra":true}}`,
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
