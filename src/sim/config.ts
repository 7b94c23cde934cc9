/**
 * The simulator's configuration, validated with zod. Every field names the
 * form it expects, so a bad flag or a bad library call says what to write.
 */
import { z } from "zod";
import { FAULT_NAMES, type FaultSpec, parseFaultSpec } from "./faults.js";
import { H100 } from "./hardware.js";
import { fleetNodeIds, invalidNodeIdReason } from "./ids.js";
import { type LoadSpec, parseLoadSpec } from "./load.js";

/** Where `llmgw gateway` listens unless told otherwise. */
export const DEFAULT_GATEWAY_PORT = 7443;

const ms = (max = 3_600_000) => z.int().min(0).max(max);

const Schema = z
  .object({
    gateways: z
      .array(z.url({ protocol: /^https?$/ }))
      .min(1)
      .optional(),
    protocol: z.enum(["connect", "grpc"]).default("connect"),
    insecureDev: z.boolean().default(false),
    certsDir: z.string().min(1).default(".data/certs"),
    nodes: z.int().min(0).max(100_000).default(4),
    nodePrefix: z
      .string()
      // Only the characters of a DNS name; whether <prefix>N is one is checked below, on the longest id.
      .regex(/^[a-z0-9.-]{0,240}$/)
      .default("node-"),
    nodeIds: z.array(z.string()).default([]),
    gpusPerNode: z.int().min(0).max(256).default(8),
    gpuProduct: z.string().min(1).max(128).default(H100.product),
    gpuMemoryMb: z.int().min(1024).max(4_194_304).default(H100.memoryMb),
    nodesPerFabric: z.int().min(0).max(100_000).default(4),
    fabricKind: z.enum(["infiniband", "roce"]).default("infiniband"),
    nvlinkDomainSize: z.int().min(0).max(1024).optional(),
    labels: z.record(z.string().regex(/^[A-Za-z0-9_./-]{1,63}$/), z.string().max(256)).default({}),
    agentVersion: z.string().min(1).max(64).default("llmgw-sim/0.1.0"),
    heartbeatMs: z.int().min(10).max(600_000).default(3000),
    startDelayMs: ms().default(5000),
    drainMs: ms().default(2000),
    kvCacheFraction: z.number().gt(0).max(1).default(0.9),
    faults: z.array(z.string()).default([]),
    faultRate: z.number().min(0).max(1).optional(),
    failAfterMs: ms().default(1500),
    crashAfterMs: ms().default(3000),
    leakMbPerHeartbeat: z.int().min(0).max(1_000_000).default(256),
    xidAfterHeartbeats: z.int().min(0).max(1_000_000).default(3),
    /** The GPU the xid fault hits; unset: one the seeded rng picks. */
    xidGpu: z.int().min(0).max(1023).optional(),
    partitionAfterMs: ms().default(10_000),
    partitionHealMs: ms().default(5000),
    reconnectMinMs: ms().default(250),
    reconnectMaxMs: ms().default(15_000),
    ackTimeoutMs: z.int().min(1).max(600_000).default(10_000),
    restartMode: z.enum(["keep", "empty"]).default("keep"),
    restartEveryMs: ms(86_400_000).default(0),
    seed: z.int().min(0).max(0xffffffff).optional(),
    load: z.array(z.string()).default([]),
    loadSlots: z.int().min(1).max(1_000_000).default(32),
    engineHttp: z.boolean().default(false),
    engineHost: z
      .string()
      .regex(/^[A-Za-z0-9.:-]{1,253}$/)
      .default("127.0.0.1"),
    engineChunkMs: ms(60_000).default(20),
    runningShards: z
      .record(
        z.string(),
        z.array(
          z
            .object({
              shardId: z.string().min(1).max(256),
              replicaId: z.string().min(1).max(256),
              model: z.string().max(256),
              profile: z.string().max(256),
              gpuIndices: z.array(z.int().min(0).max(1023)),
            })
            .strict(),
        ),
      )
      .default({}),
  })
  .strict();

/** The form each field expects, said the way an operator would write it. */
export const EXPECTED: Record<keyof z.input<typeof Schema>, string> = {
  gateways: "one or more http:// (with insecureDev) or https:// URLs",
  protocol: "connect or grpc",
  insecureDev: "true or false",
  certsDir: "a directory written by `llmgw certs`",
  nodes: "an integer from 0 to 100000",
  nodeIds: "node ids (DNS names such as gpu-1.dc1.example.com), each once, besides <prefix>1..<prefix>N",
  nodePrefix:
    "up to 240 lower-case letters, digits, '-' or '.', such that <prefix>N is a DNS name (e.g. gpu- or dc1-rack4-gpu-)",
  gpusPerNode: "an integer from 0 to 256",
  gpuProduct: "a product name of 1 to 128 characters",
  gpuMemoryMb: "an integer number of MiB from 1024 to 4194304",
  nodesPerFabric: "an integer ≥ 0 (0: no InfiniBand/RoCE pods)",
  fabricKind: "infiniband or roce",
  nvlinkDomainSize: "an integer ≥ 0 that divides the GPUs per node or is a multiple of it (0: no NVLink)",
  labels: "key=value pairs (keys: letters, digits, '_', '.', '/', '-')",
  agentVersion: "a version string of 1 to 64 characters",
  heartbeatMs: "an integer number of milliseconds from 10 to 600000",
  startDelayMs: "an integer number of milliseconds ≥ 0",
  drainMs: "an integer number of milliseconds ≥ 0",
  kvCacheFraction: "a number in (0, 1]",
  faults: `fault names (${FAULT_NAMES.join(", ")}; oom = fail), each optionally @node-id, or for a shard fault @arg=ARG (every start whose engine arguments include ARG)`,
  faultRate: "a number from 0 to 1",
  failAfterMs: "an integer number of milliseconds ≥ 0",
  crashAfterMs: "an integer number of milliseconds ≥ 0",
  leakMbPerHeartbeat: "an integer number of MiB ≥ 0",
  xidAfterHeartbeats: "an integer ≥ 0",
  xidGpu: "a GPU index (an integer ≥ 0)",
  partitionAfterMs: "an integer number of milliseconds ≥ 0",
  partitionHealMs: "an integer number of milliseconds ≥ 0",
  reconnectMinMs: "an integer number of milliseconds ≥ 0",
  reconnectMaxMs: "an integer number of milliseconds ≥ the minimum",
  ackTimeoutMs: "an integer number of milliseconds from 1 to 600000",
  restartMode: "keep or empty",
  restartEveryMs: "an integer number of milliseconds ≥ 0 (0: never)",
  seed: "an integer from 0 to 4294967295",
  load: "MODEL=CURVE[+noise=F] per model, CURVE const:V, steps:V@T/V@T..., ramp:V@T/V@T... or sine:B~A@P (e.g. chat=ramp:2@0s/40@1m+noise=0.2)",
  loadSlots: "an integer from 1 to 1000000 (requests one replica's KV cache holds)",
  engineHttp: "true or false",
  engineHost: "a host name or IP address the simulated engines listen on (e.g. 127.0.0.1)",
  engineChunkMs: "an integer number of milliseconds from 0 to 60000",
  runningShards:
    "node id → list of { shardId, replicaId, model, profile, gpuIndices } already running when the agents start",
};

export type SimConfigInput = z.input<typeof Schema>;
export type SimConfigField = keyof SimConfigInput;

/** A validated configuration, with faults parsed and derived defaults filled in. */
export type SimConfig = Omit<
  z.output<typeof Schema>,
  "gateways" | "faults" | "nvlinkDomainSize" | "faultRate" | "seed" | "load"
> & {
  gateways: string[];
  /** Load curves, one per model. */
  load: LoadSpec[];
  faults: FaultSpec[];
  nvlinkDomainSize: number;
  /** Probability that a start (or a node) draws an untargeted fault. */
  faultRate: number;
  seed: number;
};

export interface SimConfigIssue {
  field: string;
  message: string;
}

/** An invalid configuration: every issue names its field and the form it expects. */
export class SimConfigError extends Error {
  override readonly name = "SimConfigError";
  constructor(readonly issues: SimConfigIssue[]) {
    super(issues.map((i) => `${i.field}: ${i.message}`).join("; "));
  }
}

export function parseSimConfig(input: SimConfigInput): SimConfig {
  const parsed = Schema.safeParse(input);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((issue) => {
      const field = String(issue.path[0] ?? "config");
      const expected = EXPECTED[field as SimConfigField];
      const got = field in input ? ` (got ${show((input as Record<string, unknown>)[field])})` : "";
      const message =
        issue.code === "unrecognized_keys"
          ? `unknown field(s) ${issue.keys.join(", ")}`
          : `expected ${expected ?? issue.message}${got}`;
      return { field: issue.code === "unrecognized_keys" ? "config" : field, message };
    });
    throw new SimConfigError(issues);
  }
  const c = parsed.data;
  const issues: SimConfigIssue[] = [];
  const expect = (field: SimConfigField, why: string) =>
    issues.push({ field, message: `${why}; expected ${EXPECTED[field]}` });

  const gateways = c.gateways ?? [`${c.insecureDev ? "http" : "https"}://127.0.0.1:${DEFAULT_GATEWAY_PORT}`];
  for (const url of gateways) {
    const scheme = new URL(url).protocol;
    if (c.insecureDev && scheme !== "http:")
      expect("gateways", `${url} is not http:// but insecureDev (h2c) is set`);
    if (!c.insecureDev && scheme !== "https:")
      expect("gateways", `${url} is not https:// and insecureDev is not set (TLS is the default)`);
  }
  const numbered = c.nodes > 0 ? `${c.nodePrefix}${c.nodes}` : undefined;
  const idProblem = numbered === undefined ? undefined : invalidNodeIdReason(numbered);
  if (idProblem) expect("nodePrefix", idProblem);
  const ids = fleetNodeIds(c);
  // Each node is one agent with one certificate: an id named twice would be two agents fighting over one session.
  const seen = new Set(ids.slice(0, ids.length - c.nodeIds.length));
  for (const id of c.nodeIds) {
    const why = invalidNodeIdReason(id);
    if (why) expect("nodeIds", why);
    else if (seen.has(id)) expect("nodeIds", `${JSON.stringify(id)} is in the fleet twice`);
    seen.add(id);
  }

  const nvlinkDomainSize = c.nvlinkDomainSize ?? c.gpusPerNode;
  if (
    nvlinkDomainSize > 0 &&
    c.gpusPerNode > 0 &&
    (nvlinkDomainSize < c.gpusPerNode
      ? c.gpusPerNode % nvlinkDomainSize !== 0
      : nvlinkDomainSize % c.gpusPerNode !== 0)
  ) {
    expect("nvlinkDomainSize", `${nvlinkDomainSize} does not fit ${c.gpusPerNode} GPUs per node`);
  }

  const faults: FaultSpec[] = [];
  const known = new Set(ids);
  for (const text of c.faults) {
    const spec = parseFaultSpec(text);
    if (!spec) expect("faults", `unknown fault ${JSON.stringify(text)}`);
    else if (spec.node !== undefined && !known.has(spec.node))
      expect("faults", `${JSON.stringify(text)} targets ${spec.node}, which is not in this fleet`);
    else faults.push(spec);
  }
  const load: LoadSpec[] = [];
  for (const text of c.load) {
    const spec = parseLoadSpec(text);
    if (typeof spec === "string") expect("load", spec);
    else if (load.some((l) => l.model === spec.model))
      expect("load", `model ${JSON.stringify(spec.model)} has two load curves`);
    else load.push(spec);
  }
  if (c.reconnectMaxMs < c.reconnectMinMs)
    expect("reconnectMaxMs", `${c.reconnectMaxMs} is below reconnectMinMs ${c.reconnectMinMs}`);
  if (issues.length > 0) throw new SimConfigError(issues);

  // Naming a fault for every node without a rate means: always.
  const untargeted = faults.some((f) => f.node === undefined && f.engineArg === undefined);
  return {
    ...c,
    gateways,
    faults,
    load,
    nvlinkDomainSize,
    faultRate: c.faultRate ?? (untargeted ? 1 : 0),
    seed: c.seed ?? Math.floor(Math.random() * 0xffffffff),
  };
}

function show(v: unknown): string {
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}
