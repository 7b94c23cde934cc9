import { createWriteStream } from "node:fs";
import { readFile } from "node:fs/promises";
import { type Command, Option } from "commander";
import {
  DEFAULT_GATEWAY_PORT,
  EXPECTED,
  formatSummary,
  SimConfigError,
  type SimConfigField,
  type SimConfigInput,
  type SimEvent,
  SimFleet,
} from "../../sim/index.js";
import { CliError, EXIT, intArg } from "../common.js";

type Kind = "number" | "string" | "list" | "bool" | "labels";

interface Flag {
  field: SimConfigField;
  flag: string;
  arg?: string;
  kind: Kind;
  help: string;
}

/** A flag that takes a duration in milliseconds (most of the simulator's timings). */
function msFlag(field: SimConfigField, flag: string, help: string): Flag {
  return { field, flag, arg: "<ms>", kind: "number", help };
}

/** Every flag of `llmgw sim` and the config field it sets. */
const FLAGS: Flag[] = [
  {
    field: "gateways",
    flag: "--gateway",
    arg: "<urls>",
    kind: "list",
    help: `gateway URL(s), comma-separated; on failure or Reconnect the next one (default https://127.0.0.1:${DEFAULT_GATEWAY_PORT}, http:// with --insecure-dev)`,
  },
  { field: "insecureDev", flag: "--insecure-dev", kind: "bool", help: "plain HTTP/2 (h2c), no certificates" },
  {
    field: "certsDir",
    flag: "--certs-dir",
    arg: "<dir>",
    kind: "string",
    help: "certificates written by `llmgw certs` (default .data/certs)",
  },
  { field: "protocol", flag: "--protocol", arg: "<name>", kind: "string", help: "connect (default) or grpc" },
  { field: "nodes", flag: "--nodes", arg: "<n>", kind: "number", help: "number of nodes (default 4)" },
  {
    field: "nodePrefix",
    flag: "--node-prefix",
    arg: "<prefix>",
    kind: "string",
    help: "node ids are <prefix>1..<prefix>N, DNS names (default node-)",
  },
  {
    field: "nodeIds",
    flag: "--node",
    arg: "<ids>",
    kind: "list",
    help: "more nodes by name (DNS names, e.g. gpu-1.dc1.example.com), comma-separated or repeatable; --nodes 0 for only these",
  },
  {
    field: "gpusPerNode",
    flag: "--gpus-per-node",
    arg: "<n>",
    kind: "number",
    help: "GPUs per node (default 8)",
  },
  {
    field: "gpuProduct",
    flag: "--gpu-product",
    arg: "<name>",
    kind: "string",
    help: 'GPU product name (default "NVIDIA H100 80GB HBM3")',
  },
  {
    field: "gpuMemoryMb",
    flag: "--gpu-memory-mb",
    arg: "<mib>",
    kind: "number",
    help: "memory per GPU in MiB (default 81559, an H100 80 GB)",
  },
  {
    field: "nodesPerFabric",
    flag: "--nodes-per-fabric",
    arg: "<n>",
    kind: "number",
    help: "nodes per InfiniBand pod ib-pod-N (default 4; 0: none)",
  },
  {
    field: "fabricKind",
    flag: "--fabric-kind",
    arg: "<kind>",
    kind: "string",
    help: "infiniband (default) or roce",
  },
  {
    field: "nvlinkDomainSize",
    flag: "--nvlink-domain-size",
    arg: "<gpus>",
    kind: "number",
    help: "GPUs per NVLink domain (default: all GPUs of a node; larger spans nodes, as NVL72; 0: none)",
  },
  {
    field: "labels",
    flag: "--label",
    arg: "<key=value>",
    kind: "labels",
    help: "node label, repeatable or comma-separated",
  },
  {
    field: "agentVersion",
    flag: "--agent-version",
    arg: "<v>",
    kind: "string",
    help: "reported agent version",
  },
  msFlag("heartbeatMs", "--heartbeat-ms", "heartbeat period (default 3000)"),
  msFlag("startDelayMs", "--start-delay-ms", "time an engine loads before its health answers (default 5000)"),
  msFlag(
    "drainMs",
    "--drain-ms",
    "time a drained engine takes to finish what it has in flight (default 2000)",
  ),
  {
    field: "kvCacheFraction",
    flag: "--kv-cache-fraction",
    arg: "<f>",
    kind: "number",
    help: "share of GPU memory a running engine holds (default 0.9)",
  },
  {
    field: "faults",
    flag: "--fault",
    arg: "<name[@node]>",
    kind: "list",
    help: "faults: fail (oom), crash-loop (crash-after-running), hang (stuck-starting), refuse-start, never-starting, exit-after-running, slow-start, leak, partition, xid; each NAME or NAME@NODE; repeatable or comma-separated",
  },
  {
    field: "faultRate",
    flag: "--fault-rate",
    arg: "<0..1>",
    kind: "number",
    help: "chance per start (per node for node faults) of an untargeted fault (default 1 if any, else 0)",
  },
  msFlag("failAfterMs", "--fail-after-ms", "fail: time to the OOM"),
  msFlag(
    "crashAfterMs",
    "--crash-after-ms",
    "crash-loop, exit-after-running: time running before the engine exits",
  ),
  {
    field: "leakMbPerHeartbeat",
    flag: "--leak-mb-per-heartbeat",
    arg: "<mib>",
    kind: "number",
    help: "leak: MiB more per heartbeat",
  },
  {
    field: "xidAfterHeartbeats",
    flag: "--xid-after-heartbeats",
    arg: "<n>",
    kind: "number",
    help: "xid: heartbeats before the Xid",
  },
  {
    field: "xidGpu",
    flag: "--xid-gpu",
    arg: "<index>",
    kind: "number",
    help: "xid: the GPU it hits (default: one the seed picks)",
  },
  msFlag("partitionAfterMs", "--partition-after-ms", "partition: time registered before going silent"),
  msFlag(
    "partitionHealMs",
    "--partition-heal-ms",
    "partition: time before reconnecting once the gateway closed the stream",
  ),
  msFlag("reconnectMinMs", "--reconnect-min-ms", "first backoff"),
  msFlag("reconnectMaxMs", "--reconnect-max-ms", "backoff cap"),
  msFlag("ackTimeoutMs", "--ack-timeout-ms", "wait this long for the registration ack"),
  {
    field: "restartMode",
    flag: "--restart-mode",
    arg: "<mode>",
    kind: "string",
    help: "a restarted node comes back with its shards (keep, default) or none (empty)",
  },
  msFlag("restartEveryMs", "--restart-every-ms", "restart a random node this often (default 0: never)"),
  {
    field: "seed",
    flag: "--seed",
    arg: "<n>",
    kind: "number",
    help: "seed for faults, jitter and load noise",
  },
  {
    field: "load",
    flag: "--load",
    arg: "<model=curve>",
    kind: "list",
    help: "load a model's running replicas report (requests waiting across the model, split over them; other models' engines are idle): MODEL=CURVE[+noise=F], CURVE const:V, steps:V@T/V@T..., ramp:V@T/V@T... or sine:B~A@P, e.g. chat=ramp:2@0s/40@1m+noise=0.2; repeatable",
  },
  {
    field: "loadSlots",
    flag: "--load-slots",
    arg: "<n>",
    kind: "number",
    help: "requests one replica's KV cache holds: kv_cache_use = its share of the load / this (default 32)",
  },
  {
    field: "engineHttp",
    flag: "--engine-http",
    kind: "bool",
    help: "each simulated engine listens on a real port and answers the OpenAI API (chat, completions, embeddings, models, streaming), /health and vLLM's metrics; its endpoint is that address",
  },
  {
    field: "engineHost",
    flag: "--engine-host",
    arg: "<host>",
    kind: "string",
    help: "the address simulated engines listen on with --engine-http (default 127.0.0.1)",
  },
  msFlag(
    "engineChunkMs",
    "--engine-chunk-ms",
    "time between two streamed chunks of a simulated engine's answer (default 20)",
  ),
];

const FLAG_OF = new Map(FLAGS.map((f) => [f.field as string, f.flag]));

export function registerSim(program: Command): void {
  const cmd = program
    .command("sim")
    .description(
      "run a fleet of simulated nodes (the real node agent and its engine supervisor on simulated GPUs and engines) against one or more gateways",
    );
  for (const f of FLAGS) {
    const opt = new Option(f.arg ? `${f.flag} ${f.arg}` : f.flag, f.help);
    if (f.kind === "list" || f.kind === "labels") opt.argParser(collect);
    cmd.addOption(opt);
  }
  cmd
    .addOption(
      new Option("--summary-ms <ms>", "print a one-line summary this often (0: never)")
        .default(5000)
        .argParser(intArg("--summary-ms")),
    )
    .addOption(
      new Option("--duration-ms <ms>", "stop after this long (0: run until SIGINT/SIGTERM)")
        .default(0)
        .argParser(intArg("--duration-ms")),
    )
    .option("--verbose", "print every connection, command and status")
    .option(
      "--acked-out <file>",
      "append every message the gateways acknowledged to this file, one JSON line each ({nodeId, sessionId, messageId}): the agents' record for `llmgw check-log --acked`",
    )
    .option(
      "--running-shards <file>",
      "JSON file: node id → shards already running on that machine when its agent starts ({shardId, replicaId, model, profile, gpuIndices})",
    )
    .action(async (opts: Record<string, unknown>) => {
      const input = toConfig(opts);
      if (typeof opts["runningShards"] === "string")
        input.runningShards = await readRunningShards(opts["runningShards"]);
      await runSim(input, {
        summaryMs: opts["summaryMs"] as number,
        durationMs: opts["durationMs"] as number,
        verbose: opts["verbose"] === true,
        ...(typeof opts["ackedOut"] === "string" ? { ackedOut: opts["ackedOut"] } : {}),
      });
    });
}

function collect(value: string, previous: string[] | undefined): string[] {
  const items = value
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  return [...(previous ?? []), ...items];
}

/** Flag values to config input; the schema judges them, so a bad value is named with its expected form. */
export function toConfig(opts: Record<string, unknown>): SimConfigInput {
  const input: Record<string, unknown> = {};
  for (const f of FLAGS) {
    const v = opts[optionKey(f.flag)];
    if (v === undefined) continue;
    if (f.kind === "number") {
      const s = String(v);
      input[f.field] = /^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(s) ? Number(s) : s;
    } else if (f.kind === "labels") {
      const labels: Record<string, string> = {};
      for (const pair of v as string[]) {
        const eq = pair.indexOf("=");
        if (eq <= 0)
          throw new CliError(`invalid --label ${JSON.stringify(pair)}: expected ${EXPECTED.labels}`);
        labels[pair.slice(0, eq)] = pair.slice(eq + 1);
      }
      input[f.field] = labels;
    } else {
      input[f.field] = v;
    }
  }
  return input as SimConfigInput;
}

/** The key commander stores a flag's value under: `--gpus-per-node` → `gpusPerNode`. */
function optionKey(flag: string): string {
  return flag.slice(2).replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}

function configError(err: SimConfigError): CliError {
  const lines = err.issues.map((i) => `invalid ${FLAG_OF.get(i.field) ?? i.field}: ${i.message}`);
  return new CliError(lines.join("\n"), EXIT.usage);
}

async function runSim(
  input: SimConfigInput,
  run: { summaryMs: number; durationMs: number; verbose: boolean; ackedOut?: string },
): Promise<void> {
  let fleet: SimFleet;
  try {
    fleet = new SimFleet(input);
  } catch (err) {
    if (err instanceof SimConfigError) throw configError(err);
    throw err;
  }
  const c = fleet.config;
  const out = (line: string) => process.stdout.write(`${line}\n`);
  const seen = new Set<string>();
  const ackedOut = run.ackedOut === undefined ? undefined : createWriteStream(run.ackedOut, { flags: "a" });
  ackedOut?.on("error", (err) => process.stderr.write(`llmgw sim: --acked-out: ${err.message}\n`));
  fleet.on((e) => {
    if (e.type === "acked") {
      ackedOut?.write(
        `${JSON.stringify({ nodeId: e.nodeId, sessionId: e.sessionId, messageId: e.messageId })}\n`,
      );
      return;
    }
    if (run.verbose) out(describe(e));
    else if (e.type === "disconnected" && !seen.has(e.reason)) {
      // One line per distinct reason: a thousand nodes losing one gateway is one problem.
      seen.add(e.reason);
      process.stderr.write(`llmgw sim: ${e.nodeId} lost ${e.url}: ${e.reason}\n`);
    }
  });
  try {
    await fleet.start();
  } catch (err) {
    throw new CliError(err instanceof Error ? err.message : String(err), EXIT.usage);
  }
  out(
    `llmgw sim: ${c.nodes} nodes × ${c.gpusPerNode} ${c.gpuProduct} (${c.gpuMemoryMb} MiB) → ` +
      `${c.gateways.join(", ")}${c.insecureDev ? " (insecure h2c)" : ""}; seed ${c.seed}`,
  );
  const ticker =
    run.summaryMs > 0 ? setInterval(() => out(formatSummary(fleet.summary())), run.summaryMs) : undefined;
  await new Promise<void>((resolve) => {
    const done = () => {
      process.off("SIGINT", done);
      process.off("SIGTERM", done);
      clearTimeout(timer);
      resolve();
    };
    const timer = run.durationMs > 0 ? setTimeout(done, run.durationMs) : undefined;
    process.once("SIGINT", done);
    process.once("SIGTERM", done);
  });
  clearInterval(ticker);
  await fleet.stop();
  if (ackedOut) await new Promise<void>((resolve) => ackedOut.end(resolve));
  out(`stopped: ${formatSummary(fleet.summary())}`);
}

function describe(e: SimEvent): string {
  switch (e.type) {
    case "connecting":
      return `${e.nodeId}: connecting to ${e.url}`;
    case "registered":
      return `${e.nodeId}: registered with ${e.url}`;
    case "acked":
      return `${e.nodeId}: message ${e.messageId} of session ${e.sessionId} acknowledged`;
    case "disconnected":
      return `${e.nodeId}: disconnected from ${e.url}: ${e.reason}`;
    case "command":
      return `${e.nodeId}: ${e.command} ${e.shardId} (${e.commandId}) ${e.ok ? "ok" : `refused: ${e.error}`}`;
    case "status":
      return `${e.nodeId}: shard ${e.shardId} ${e.state}${e.error ? `: ${e.error}` : ""}${e.sent ? "" : " (not sent: offline)"}`;
    case "problem":
      return `${e.nodeId}: problem: ${e.problem}`;
    case "partitioned":
      return `${e.nodeId}: partitioned (silent until the gateway closes the stream)`;
    case "restarted":
      return `${e.nodeId}: restarted ${e.keepShards ? "keeping its shards" : "empty"}`;
    default: {
      const never: never = e;
      return JSON.stringify(never);
    }
  }
}

async function readRunningShards(file: string): Promise<SimConfigInput["runningShards"]> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw new CliError(`invalid --running-shards: cannot read ${file}: ${(err as Error).message}`);
  }
  try {
    return JSON.parse(text) as SimConfigInput["runningShards"];
  } catch (err) {
    throw new CliError(`invalid --running-shards: ${file} is not JSON: ${(err as Error).message}`);
  }
}
