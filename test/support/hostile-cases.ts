/**
 * Hostile inputs of an agent, shared by the tests that send them through
 * real streams to a real gateway (test/gateway/hostile.test.ts) and those
 * that feed them to the pure session core (test/gateway/session-core.test.ts).
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import {
  type AgentMessageSchema,
  type CommandResultSchema,
  ShardStatus_State,
  type ShardStatusSchema,
} from "../../src/gen/llmgw/v1/agent_pb.js";
import type { RegisterInit } from "./agent.js";
import { h100Registration } from "./sample-events.js";

export type AgentMessageInit = MessageInitShape<typeof AgentMessageSchema>;
/** What it is, the registration of node `node`, and what the refusal must say. */
export type RegistrationCase = [string, (node: string) => RegisterInit, RegExp];
/** What it is, the message of node `node` after its registration, and what the refusal must say. */
export type MessageCase = [string, (node: string) => AgentMessageInit, RegExp];

const shard = (value: MessageInitShape<typeof ShardStatusSchema>): AgentMessageInit => ({
  msg: { case: "shard", value },
});
const result = (value: MessageInitShape<typeof CommandResultSchema>): AgentMessageInit => ({
  msg: { case: "result", value },
});
const register = (value: RegisterInit): AgentMessageInit => ({ msg: { case: "register", value } });

/** Registrations whose repeated fields are over the limits. */
const base = (node: string) => h100Registration(node);
export const MANY_FIELDS: RegistrationCase[] = [
  [
    "300 GPUs",
    (n) => ({
      ...base(n),
      gpus: Array.from({ length: 300 }, (_, i) => ({ index: i, memoryTotalMb: 1n })),
      fabrics: [],
    }),
    /invalid registration: gpus lists 300 entries; at most 256/,
  ],
  [
    "2,000 labels",
    (n) => ({
      ...base(n),
      labels: Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`k${i}`, ""])),
    }),
    /labels lists 2000 entries/,
  ],
  [
    "a running shard on 10,000 GPU indices",
    (n) => ({
      ...base(n),
      runningShards: [
        { shardId: "s1", replicaId: "r1", gpuIndices: Array.from({ length: 10_000 }, (_, i) => i % 8) },
      ],
    }),
    /running_shards\[0\]\.gpu_indices lists 10000 GPUs; at most 256/,
  ],
  [
    "a GPU with 1,000 problems",
    (n) => {
      const r = base(n);
      const problems = Array.from({ length: 1000 }, (_, i) => `Xid ${i}`);
      return { ...r, gpus: r.gpus.map((g, i) => (i === 0 ? { ...g, problems } : g)) };
    },
    /gpus\[0\]\.problems lists 1000 problems; at most 256/,
  ],
];

/** Registrations that list a GPU or a shard twice, or a shard without an id. */
export const DUPLICATES: RegistrationCase[] = [
  [
    "a GPU index listed twice",
    (n) => {
      const r = h100Registration(n);
      r.gpus[3] = { ...r.gpus[3]!, index: 1 };
      return r;
    },
    /invalid registration: gpus\[3\]\.index: GPU index 1 is listed twice \(also gpus\[1\]\)/,
  ],
  [
    "a shard id listed twice",
    (n) =>
      h100Registration(n, [
        { shard: "s1", replica: "r1", gpus: [0, 1] },
        { shard: "s1", replica: "r2", gpus: [2, 3] },
      ]),
    /running_shards\[1\]\.shard_id: shard "s1" is listed twice \(also running_shards\[0\]\)/,
  ],
  [
    "a running shard without an id",
    (n) => h100Registration(n, [{ shard: "", replica: "r1", gpus: [0] }]),
    /running_shards\[0\]\.shard_id is empty/,
  ],
];

/** Messages with ids that would reach an object's prototype in the projected state. */
export const RESERVED_IDS: MessageCase[] = [
  [
    "a shard status of replica constructor",
    (_) => shard({ replicaId: "constructor", shardId: "s1", state: ShardStatus_State.RUNNING }),
    /invalid shard status: shard\.replica_id "constructor" is a reserved name/,
  ],
  [
    "a shard status of shard __proto__",
    (_) => shard({ replicaId: "r1", shardId: "__proto__", state: ShardStatus_State.RUNNING }),
    /shard\.shard_id "__proto__" is a reserved name/,
  ],
  [
    "a command result for command toString",
    (_) => result({ commandId: "toString", ok: true }),
    /invalid command result: result\.command_id "toString" is a reserved name/,
  ],
  [
    "a re-registration running replica hasOwnProperty",
    (n) => register(h100Registration(n, [{ shard: "s1", replica: "hasOwnProperty", gpus: [0] }])),
    /running_shards\[0\]\.replica_id "hasOwnProperty" is a reserved name/,
  ],
];

/** Shard endpoints routers could not use: what it is, the endpoint, what the refusal must say. */
export const BAD_ENDPOINTS: Array<[string, string, RegExp]> = [
  [
    "a script URL",
    "javascript:alert(1)",
    /shard\.endpoint "javascript:alert\(1\)" is not an http:\/\/ or https:\/\/ URL/,
  ],
  ["words", "the usual port", /shard\.endpoint "the usual port" is not an http/],
  [
    "3,000 characters",
    `http://h/${"x".repeat(3000)}`,
    /shard\.endpoint is 3009 characters long; at most 2048/,
  ],
];

/** Node ids that are not DNS names (so never a subject token). */
export const ODD_NODE_IDS: Array<[string, string]> = [
  ["a wildcard", "gpu-*"],
  ["a full wildcard", "gpu->"],
  ["a lone >", ">"],
  ["upper case", "GPU-EVIL"],
  // '_' is how a dot is written in a subject: "gpu_evil" must never alias "gpu.evil".
  ["an underscore", "gpu_evil"],
  ["an empty label", "gpu..evil"],
  ["a leading dot", ".gpu"],
  ["a trailing dot", "gpu."],
  ["a label ending in '-'", "gpu-.evil"],
  ["a label starting with '-'", "-gpu"],
  ["a 64-character label", `${"g".repeat(64)}.example.com`],
  ["254 characters", `${"g".repeat(63)}.`.repeat(4).slice(0, 254)],
  ["a space", "gpu evil"],
  ["a tab", "gpu\tevil"],
  ["a newline", "gpu\r\nPUB x 1"],
  ["a NUL", "gpu\u0000evil"],
  ["a non-ASCII letter", "gpu-ü"],
  ["an emoji", "gpu-😀"],
  ["full-width letters", "ｇｐｕ"],
  ["a right-to-left override", "gpu-\u202egnp"],
  ["65 characters", "g".repeat(65)],
  ["2,000 characters", "g".repeat(2_000)],
  ["nothing", ""],
  ["the name of an object's prototype", "__proto__"],
  ["the name of an object's constructor", "constructor"],
  ["the name of an object method", "hasOwnProperty"],
];
