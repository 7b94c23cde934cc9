/**
 * `llmgw dev`: the whole control plane and a simulated fleet on one machine.
 * Every part is a child process running the same `llmgw` commands an
 * operator would run in production; dev only wires them together.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { type Command, Option } from "commander";
import { connectNats } from "../../log/index.js";
import { DEFAULT_LAYOUT } from "../../nats-auth/index.js";
import { ApiCallError, ApiClient } from "../../operator/client.js";
import { PACKAGE_ROOT } from "../../package-root.js";
import { CliError, EXIT, intArg } from "../common.js";
import { Children } from "../dev/children.js";
import { DEFAULT_DEV_DATA_DIR, devCredsDir } from "../dev/paths.js";
import { pickPort } from "../dev/ports.js";
import {
  countRealEngines,
  realAgentStateDirs,
  startRealAgents,
  stopRealEngines,
} from "../dev/real-agents.js";
import { runningShardsByNode } from "../dev/resume.js";
import { fetchSummary, formatSummary } from "../dev/summary.js";
import { writeNatsAuth } from "../nats-auth-files.js";
import { natsSecurityFrom } from "../nats-security.js";
import { logMaxAgeOption, logMaxBytesOption } from "../retention-options.js";

const ROOT = PACKAGE_ROOT;
const LLMGW = join(ROOT, "bin/llmgw.js");

interface DevOptions {
  dataDir: string;
  nodes: number;
  gpusPerNode: number;
  natsPort: number;
  gatewayPort: number;
  apiPort: number;
  routerPort: number;
  catalog: string | false;
  summaryMs: number;
  startDelayMs: number;
  agents: "sim" | "real";
  natsAuth: boolean;
  logMaxAge: number;
  logMaxBytes: number;
  stopEngines?: boolean;
}

export function registerDev(program: Command): void {
  program
    .command("dev")
    .description(
      "run NATS, a gateway, a reconciler, the API, the archiver, a router and a simulated fleet on this machine, and apply the example catalog",
    )
    .addOption(logMaxAgeOption())
    .addOption(logMaxBytesOption())
    .addOption(
      new Option(
        "--data-dir <dir>",
        "where NATS keeps the log, the parts write their logs and creds/ holds the NATS credentials",
      ).default(DEFAULT_DEV_DATA_DIR, ".data/dev in the project"),
    )
    .option(
      "--no-nats-auth",
      "run NATS without authentication (by default every part gets its role's credentials from <data-dir>/creds)",
    )
    .addOption(new Option("--nodes <n>", "simulated GPU nodes").default(8).argParser(intArg("--nodes")))
    .addOption(
      new Option("--gpus-per-node <n>", "GPUs per node (H100 80 GB)")
        .default(8)
        .argParser(intArg("--gpus-per-node")),
    )
    .addOption(
      new Option("--nats-port <port>", "NATS client port (0: any free; taken: any free)")
        .default(4222)
        .argParser(intArg("--nats-port")),
    )
    .addOption(
      new Option("--gateway-port <port>", "gateway port (h2c on loopback)")
        .default(7443)
        .argParser(intArg("--gateway-port")),
    )
    .addOption(
      new Option("--api-port <port>", "operator API and UI port")
        .default(8080)
        .argParser(intArg("--api-port")),
    )
    .addOption(
      new Option("--router-port <port>", "router port: the OpenAI API of the fleet (llmgw router)")
        .default(8000)
        .argParser(intArg("--router-port")),
    )
    .addOption(
      new Option("--catalog <file>", "catalog applied when the log has none yet").default(
        join(ROOT, "examples/catalog.yaml"),
        "examples/catalog.yaml",
      ),
    )
    .option("--no-catalog", "apply no catalog")
    .addOption(
      new Option("--start-delay-ms <ms>", "simulated engine start-up time")
        .default(3000)
        .argParser(intArg("--start-delay-ms")),
    )
    .addOption(
      new Option(
        "--agents <kind>",
        "sim: node agents in one llmgw sim process, on simulated GPUs and engines; real: one llmgw agent process per node, GPUs from a file and a fake engine",
      )
        .choices(["sim", "real"])
        .default("sim"),
    )
    .option(
      "--stop-engines",
      "end the engines --agents real left running under --data-dir (they outlive dev, as engines outlive agents on real machines), and exit",
    )
    .addOption(
      new Option("--summary-ms <ms>", "summary line period (0: none)")
        .default(1000)
        .argParser(intArg("--summary-ms")),
    )
    .action(async (opts: DevOptions) => {
      if (opts.stopEngines) {
        const n = await stopRealEngines(await realAgentStateDirs(resolve(opts.dataDir)));
        process.stdout.write(`${n === 0 ? "no engines were running" : `stopped ${n} engines`}\n`);
        return;
      }
      await runDev(opts);
    });
}

async function natsServerBinary(): Promise<string> {
  const fromEnv = process.env["LLMGW_NATS_SERVER"];
  if (fromEnv) return fromEnv;
  try {
    const { stdout } = await promisify(execFile)(join(ROOT, "scripts/ensure-nats-server"), {
      encoding: "utf8",
    });
    const bin = stdout.trim().split("\n").pop();
    if (bin) return bin;
  } catch (err) {
    throw new CliError(
      `no nats-server >= 2.15: ${(err as { stderr?: string }).stderr?.trim() || (err as Error).message}`,
      EXIT.failure,
    );
  }
  throw new CliError("scripts/ensure-nats-server found no nats-server", EXIT.failure);
}

async function waitUntil<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | undefined>,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new CliError(
        `${what} did not come up within ${timeoutMs / 1000} s${last ? `: ${String(last)}` : ""}`,
        EXIT.failure,
      );
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function runDev(opts: DevOptions): Promise<void> {
  const dataDir = resolve(opts.dataDir);
  const logDir = join(dataDir, "logs");
  await mkdir(join(dataDir, "nats"), { recursive: true });
  await mkdir(logDir, { recursive: true });
  const say = (line: string) => process.stdout.write(`${line}\n`);

  let failed: string | undefined;
  const stop = new AbortController();
  let realStateDirs: string[] = [];
  let resumedCount = 0;
  const children = new Children(logDir, (c, code) => {
    failed = `${c.name} exited unexpectedly (${code}); see ${c.logFile}`;
    stop.abort();
  });
  const onSignal = () => stop.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);

  try {
    const natsPort = await pickPort(opts.natsPort);
    const natsUrl = `nats://127.0.0.1:${natsPort}`;
    const nats = await natsServerBinary();
    // Reused across runs, so commands keep working with the files they were given (a role
    // added since gets its credentials beside them).
    const creds = opts.natsAuth
      ? writeNatsAuth(devCredsDir(dataDir), DEFAULT_LAYOUT, { force: false, keepExisting: true })
      : undefined;
    children.start("nats", nats, [
      // auth.conf is a whole config by itself (the authorization block); the flags add the rest.
      ...(creds ? ["--config", creds.serverConfig] : []),
      "--jetstream",
      "--store_dir",
      join(dataDir, "nats"),
      "--addr",
      "127.0.0.1",
      "--port",
      String(natsPort),
      "--server_name",
      "llmgw-dev",
    ]);
    await waitUntil("nats-server", 20_000, async () => {
      const nc = await connectNats({
        url: natsUrl,
        name: "llmgw-dev probe",
        timeoutMs: 1000,
        ...(creds ? { security: natsSecurityFrom({ natsCreds: creds.nkeys.reader }) } : {}),
      });
      await nc.close();
      return true;
    });

    const env = { LLMGW_NATS_URL: natsUrl };
    // Each part of the control plane with its own role's credentials; agents never speak to NATS.
    const as = (role: "api" | "gateway" | "reconciler" | "router" | "archiver") =>
      creds ? { ...env, LLMGW_NATS_CREDS: creds.nkeys[role] } : env;
    const gatewayPort = await pickPort(opts.gatewayPort);
    const apiPort = await pickPort(opts.apiPort);
    const routerPort = await pickPort(opts.routerPort);
    const routerUrl = `http://127.0.0.1:${routerPort}`;
    const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
    const apiUrl = `http://127.0.0.1:${apiPort}`;

    const reconcilerConfig = join(dataDir, "reconciler.yaml");
    if (!existsSync(reconcilerConfig)) {
      // Short expiry so a newcomer sees a silent node go suspect and lost within a minute.
      await writeFile(reconcilerConfig, "policy: binpack\nsuspectAfterMs: 15000\nlostAfterMs: 45000\n");
    }
    // The API first: dev reads the fleet the log already holds through it.
    children.start(
      "api",
      process.execPath,
      // The UI shows requests per replica as the dev router counts them.
      [LLMGW, "api", "--dev", "--listen", `127.0.0.1:${apiPort}`, "--router-url", routerUrl],
      as("api"),
    );
    const api = new ApiClient({ url: apiUrl });
    await waitUntil("the API", 60_000, async () => (await api.send((c) => c.GET("/readyz"))).body);
    children.start(
      "gateway",
      process.execPath,
      [
        ...[LLMGW, "gateway", "--insecure-dev", "--id", "gw-dev", "--listen", `127.0.0.1:${gatewayPort}`],
        // Nothing to hand over on a developer's machine: exit within seconds of a Ctrl-C.
        ...["--drain-deadline", "2000"],
        // Every simulated node connects from loopback: the per-address cap must fit the whole fleet.
        ...["--max-connections-per-address", String(Math.max(256, opts.nodes + 64))],
      ],
      as("gateway"),
    );
    children.start(
      "reconciler",
      process.execPath,
      [LLMGW, "reconciler", "--id", "rec-dev", "--config", reconcilerConfig],
      as("reconciler"),
    );
    // The data plane: read-only on NATS (the routing table and load reports).
    children.start(
      "router",
      process.execPath,
      [LLMGW, "router", "--listen", `127.0.0.1:${routerPort}`],
      as("router"),
    );
    children.start(
      "archiver",
      process.execPath,
      [
        ...[LLMGW, "archiver", "--log-max-age", `${opts.logMaxAge}ms`],
        ...["--log-max-bytes", String(opts.logMaxBytes)],
      ],
      as("archiver"),
    );

    const catalogSeq = (await api.send((c) => c.GET("/v1/catalog"))).body.seq;
    if (opts.catalog !== false && catalogSeq === 0) {
      const text = await readCatalog(opts.catalog);
      try {
        const r = await api.applyCatalogText(text, opts.catalog.endsWith(".json") ? "json" : "yaml");
        say(`applied ${opts.catalog} (log seq ${r.body.seq})`);
      } catch (err) {
        if (err instanceof ApiCallError && err.issues.length > 0) {
          throw new CliError(
            `${opts.catalog} is not a valid catalog:\n${err.issues.map((i) => `  ${i.path}: ${i.message}`).join("\n")}`,
          );
        }
        throw err;
      }
    } else if (catalogSeq > 0) {
      say(
        `catalog from the log (seq ${catalogSeq}); edit it with: llmgw catalog apply -f FILE --api ${apiUrl}`,
      );
    }

    if (opts.agents === "real") {
      realStateDirs = await startRealAgents(children, {
        dataDir,
        nodes: opts.nodes,
        gpusPerNode: opts.gpusPerNode,
        gatewayUrl,
        startDelayMs: opts.startDelayMs,
        env,
      });
    } else {
      // Machines keep their engines while the control plane restarts.
      const replicas = (await api.send((c) => c.GET("/v1/replicas"))).body.replicas;
      const resumed = runningShardsByNode(replicas);
      const resumeFile = join(dataDir, "sim-running-shards.json");
      await writeFile(resumeFile, JSON.stringify(resumed, null, 2));
      resumedCount = Object.values(resumed).reduce((a, l) => a + l.length, 0);
      children.start(
        "sim",
        process.execPath,
        [
          LLMGW,
          "sim",
          "--insecure-dev",
          "--gateway",
          gatewayUrl,
          "--nodes",
          String(opts.nodes),
          "--node-prefix",
          "gpu-",
          "--gpus-per-node",
          String(opts.gpusPerNode),
          "--nodes-per-fabric",
          "4",
          "--heartbeat-ms",
          "2000",
          "--start-delay-ms",
          String(opts.startDelayMs),
          "--running-shards",
          resumeFile,
          "--summary-ms",
          "10000",
          // Engines answer the OpenAI API on loopback, so requests can be sent to replicas.
          "--engine-http",
        ],
        env,
      );
    }

    await waitUntil("the router", 60_000, async () =>
      (await fetch(`${routerUrl}/healthz`)).status === 200 ? true : undefined,
    );
    say(`llmgw dev is up (data in ${dataDir}, logs in ${logDir})`);
    say(`  API and UI  ${apiUrl}`);
    say(`  router      ${routerUrl} (OpenAI API: POST ${routerUrl}/v1/chat/completions, GET /v1/models)`);
    say(`  NATS        ${natsUrl}${creds ? " (authentication on)" : " (no authentication)"}`);
    if (creds) {
      say(`  NATS reader ${creds.nkeys.reader}`);
      const readers = "llmgw events, replay, explain, what-if and check-log";
      say(
        resolve(opts.dataDir) === DEFAULT_DEV_DATA_DIR && natsPort === 4222
          ? `              ${readers} find it by themselves`
          : `              for ${readers}: export LLMGW_NATS_URL=${natsUrl} LLMGW_NATS_CREDS=${creds.nkeys.reader}`,
      );
    }
    say(`  gateway     ${gatewayUrl} (h2c, insecure dev mode)`);
    say(
      opts.agents === "real"
        ? `  fleet       ${opts.nodes} real node agents (llmgw agent) × ${opts.gpusPerNode} GPUs from a file, fake engines; state in ${join(dataDir, "agents")}`
        : `  fleet       ${opts.nodes} simulated nodes × ${opts.gpusPerNode} H100 80 GB${resumedCount > 0 ? `, ${resumedCount} shards still running from the last run` : ""}`,
    );
    say(
      opts.agents === "real"
        ? "Ctrl-C stops the control plane and the node agents; the engines keep running (as on real machines) until `llmgw dev --stop-engines`."
        : "Ctrl-C stops everything.",
    );

    const tty = process.stdout.isTTY === true;
    let last = "";
    while (!stop.signal.aborted) {
      if (opts.summaryMs > 0) {
        try {
          const line = formatSummary(await fetchSummary(api));
          if (line !== last) {
            if (tty) process.stdout.write(`\r\x1b[2K${line}`);
            else say(line);
            last = line;
          }
        } catch {
          // The API restarting is shown by its own exit; keep the last line.
        }
      }
      await sleepUnlessAborted(opts.summaryMs > 0 ? opts.summaryMs : 1000, stop.signal);
    }
    if (tty) process.stdout.write("\n");
  } finally {
    process.removeListener("SIGINT", onSignal);
    process.removeListener("SIGTERM", onSignal);
    say("stopping…");
    await children.stopAll();
    // Engines outlive their agents, as on real machines: the next `dev --agents real` adopts them.
    const engines = await countRealEngines(realStateDirs);
    if (engines > 0)
      say(
        `${engines} engines keep running: engines outlive their node agents by design, and the next \`llmgw dev --agents real\` adopts them; \`llmgw dev --stop-engines\` ends them`,
      );
    say("stopped");
  }
  if (failed) throw new CliError(failed, EXIT.failure);
}

async function readCatalog(file: string): Promise<string> {
  try {
    return await readFile(file, "utf8");
  } catch (err) {
    throw new CliError(`--catalog: cannot read ${file}: ${(err as Error).message}`);
  }
}

function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}
