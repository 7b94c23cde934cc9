/** `llmgw agent`: the node agent of a real GPU machine. */
import { randomInt } from "node:crypto";
import { isAbsolute } from "node:path";
import { type Command, Option } from "commander";
import pino from "pino";
import { invalidNodeIdReason } from "../../agent/client/index.js";
import {
  AgentConfigError,
  AgentMetrics,
  discoverFromFile,
  discoverWithNvidiaSmi,
  EngineSupervisor,
  fileProblemLedger,
  fileSource,
  GpuDiscoveryError,
  HostInstallError,
  hostInstallLayout,
  loadAgentConfig,
  NodeAgent,
  nvidiaSmiSource,
  openKernelLog,
  TlsFiles,
  TlsFilesError,
  type WrittenEntry,
  writeHostInstall,
} from "../../agent/index.js";
import { isLoopback, serveRegistry } from "../../metrics-endpoint/index.js";
import { CliError, EXIT, intArg } from "../common.js";

interface AgentFlags {
  config?: string;
  gateway?: string[];
  tlsCert?: string;
  tlsKey?: string;
  ca?: string;
  insecureDev?: boolean;
  nodeId?: string;
  advertiseAddress?: string;
  nvidiaSmi: string;
  gpusFrom?: string;
  kernelLog?: string;
  stateDir?: string;
  heartbeatMs?: number;
  metricsListen?: string;
  logLevel: string;
}

const env = (name: string) => `LLMGW_AGENT_${name}`;
const collect = (v: string, prev: string[] | undefined) => [
  ...(prev ?? []),
  ...v.split(",").filter((s) => s !== ""),
];

export function registerAgent(program: Command): void {
  const agent = program
    .command("agent")
    .description(
      "the node agent of a GPU machine: discovers the GPUs (nvidia-smi), supervises inference engines, keeps a stream to a gateway (docs/agent.md)",
    )
    .addOption(
      // Required to run the agent, checked there: `agent install` does not take it.
      new Option("--config <file>", "agent config (YAML/JSON): engines, hardware, state dir (required)").env(
        env("CONFIG"),
      ),
    )
    .addOption(
      new Option("--gateway <url>", "gateway URL, repeatable or comma-separated; tried in order")
        .env(env("GATEWAY"))
        .argParser(collect),
    )
    .addOption(
      new Option("--tls-cert <file>", "the node's client certificate (PEM); its CN is the node id").env(
        env("TLS_CERT"),
      ),
    )
    .addOption(new Option("--tls-key <file>", "the node's key (PEM)").env(env("TLS_KEY")))
    .addOption(new Option("--ca <file>", "CA that signed the gateways' certificates (PEM)").env(env("CA")))
    .addOption(
      new Option("--insecure-dev", "h2c to a loopback gateway, no certificates: local development only").env(
        env("INSECURE_DEV"),
      ),
    )
    .addOption(
      new Option("--node-id <id>", "node id (a DNS name); default: the certificate's CN").env(env("NODE_ID")),
    )
    .addOption(
      new Option(
        "--advertise-address <host>",
        "where other nodes and the data plane reach this node (default: the node id)",
      ).env(env("ADVERTISE_ADDRESS")),
    )
    .addOption(
      new Option("--nvidia-smi <path>", "nvidia-smi to run").env(env("NVIDIA_SMI")).default("nvidia-smi"),
    )
    .addOption(
      new Option(
        "--gpus-from <file>",
        "GPUs from a YAML/JSON list instead of nvidia-smi (machines without NVIDIA tools)",
      ).env(env("GPUS_FROM")),
    )
    .addOption(
      new Option(
        "--kernel-log <path>",
        'where the driver logs Xid errors, read for GPU problems (default: the config\'s, /dev/kmsg; "off" for none)',
      ).env(env("KERNEL_LOG")),
    )
    .addOption(
      new Option("--state-dir <dir>", "engine records and logs (default: the config's stateDir)").env(
        env("STATE_DIR"),
      ),
    )
    .addOption(
      new Option("--heartbeat-ms <ms>", "heartbeat and GPU sample period (default: the config's, 3000)")
        .env(env("HEARTBEAT_MS"))
        .argParser(intArg("--heartbeat-ms")),
    )
    .addOption(
      new Option(
        "--metrics-listen <host:port>",
        "Prometheus /metrics endpoint, off unless given (host:port; a port alone listens on loopback; 0.0.0.0:PORT for every address)",
      ).env(env("METRICS_LISTEN")),
    )
    .addOption(new Option("--log-level <level>", "pino log level").env("LLMGW_LOG_LEVEL").default("info"))
    .action(async (flags: AgentFlags) => {
      await runAgent(flags);
    });
  registerAgentInstall(agent);
}

interface InstallFlags {
  root: string;
  config: string;
  bin: string;
  tlsDir: string;
  metricsListen: string;
}

function registerAgentInstall(agent: Command): void {
  agent
    .command("install")
    .description(
      "lay out the host install under --root: the systemd unit llmgw-agent.service (its own user, engines outlive agent restarts), the user (sysusers.d), the config skeleton (kept if present) and the state directory (docs/agent.md)",
    )
    .addOption(new Option("--root <dir>", "the root the files are written under").default("/"))
    .addOption(
      new Option("--config <file>", "the agent config the unit reads (absolute, on the host)").default(
        "/etc/llmgw/agent.yaml",
      ),
    )
    .addOption(
      new Option("--bin <path>", "the llmgw launcher the unit runs (absolute, on the host)").default(
        "/opt/llmgw-agent/bin/llmgw",
      ),
    )
    .addOption(
      new Option("--tls-dir <dir>", "where the node's node.crt, node.key and ca.crt are (absolute)").default(
        "/etc/llmgw/tls",
      ),
    )
    .addOption(
      new Option("--metrics-listen <host:port>", "the agent's Prometheus endpoint in the unit").default(
        "0.0.0.0:9401",
      ),
    )
    .action(async (own: InstallFlags) => {
      // The agent's own --config and --metrics-listen take these values wherever
      // they stand on the command line (commander gives a parent's options to
      // the parent): the unit gets what was given, else install's defaults.
      const parent = agent.opts<AgentFlags>();
      const flags: InstallFlags = {
        ...own,
        config: parent.config ?? own.config,
        metricsListen: parent.metricsListen ?? own.metricsListen,
      };
      for (const [flag, value] of [
        ["--config", flags.config],
        ["--bin", flags.bin],
        ["--tls-dir", flags.tlsDir],
      ] as const)
        if (!isAbsolute(value) || /\s/.test(value))
          throw new CliError(
            `${flag} must be an absolute path without spaces (it goes into the unit), got ${value}`,
          );
      let written: WrittenEntry[];
      try {
        written = await writeHostInstall(
          flags.root,
          hostInstallLayout({
            config: flags.config,
            bin: flags.bin,
            tlsDir: flags.tlsDir,
            metricsListen: flags.metricsListen,
          }),
        );
      } catch (err) {
        if (err instanceof HostInstallError) throw new CliError(err.message, EXIT.failure);
        throw err;
      }
      for (const w of written) process.stdout.write(`${w.outcome.padEnd(8)} ${w.path}\n`);
      process.stdout.write(
        [
          "",
          "Next, on the host:",
          "  systemd-sysusers                      # creates the llmgw-agent user",
          `  chgrp llmgw-agent ${flags.config} ${flags.tlsDir}`,
          `  # fill in every CHANGE-ME of ${flags.config}; put node.crt, node.key (0640, group llmgw-agent) and ca.crt into ${flags.tlsDir}`,
          "  systemctl daemon-reload && systemctl enable --now llmgw-agent",
          "",
        ].join("\n"),
      );
    });
}

async function runAgent(flags: AgentFlags): Promise<void> {
  if (flags.config === undefined)
    throw new CliError(
      "llmgw agent needs --config FILE (or LLMGW_AGENT_CONFIG); `llmgw agent install` writes one",
    );
  const logger = pino({ level: flags.logLevel, base: { service: "llmgw-agent" } });
  let config: Awaited<ReturnType<typeof loadAgentConfig>>;
  try {
    config = await loadAgentConfig(flags.config);
  } catch (err) {
    if (err instanceof AgentConfigError) throw new CliError(err.message);
    throw err;
  }
  const gateways = flags.gateway ?? config.gateways ?? [];
  if (gateways.length === 0)
    throw new CliError("llmgw agent needs --gateway URL (or gateways: in the config)");
  const tlsFlags = [flags.tlsCert, flags.tlsKey, flags.ca];
  let tls: TlsFiles | undefined;
  const metrics = new AgentMetrics().withProcessMetrics();
  if (flags.insecureDev) {
    if (tlsFlags.some((f) => f !== undefined))
      throw new CliError("--insecure-dev takes no --tls-cert, --tls-key or --ca");
    for (const g of gateways) {
      const u = new URL(g);
      if (u.protocol !== "http:" || !isLoopback(u.hostname.replace(/^\[|\]$/g, "")))
        throw new CliError(
          `--insecure-dev only talks h2c to a loopback gateway (http://127.0.0.1:PORT), got --gateway ${g}`,
        );
    }
  } else {
    if (tlsFlags.some((f) => f === undefined))
      throw new CliError(
        "llmgw agent needs --tls-cert, --tls-key and --ca (or --insecure-dev for a gateway on loopback)",
      );
    try {
      tls = await TlsFiles.open(
        { cert: flags.tlsCert!, key: flags.tlsKey!, ca: flags.ca! },
        {
          onChange: (e) => {
            metrics.tlsReloads.inc({ outcome: e.ok ? "ok" : "error" });
            if (e.ok) logger.info({}, "certificate files changed: the next connection uses them");
            else
              logger.error(
                { error: e.error },
                "certificate files changed but cannot be used; keeping the old ones",
              );
          },
        },
      );
    } catch (err) {
      if (err instanceof TlsFilesError) throw new CliError(err.message);
      throw err;
    }
  }
  const cn = tls?.commonName;
  const nodeId = flags.nodeId ?? config.nodeId ?? cn;
  if (!nodeId)
    throw new CliError("llmgw agent needs --node-id (or a client certificate whose CN is the node id)");
  const bad = invalidNodeIdReason(nodeId);
  if (bad) throw new CliError(`--node-id: ${bad}`);
  if (cn !== undefined && cn !== nodeId)
    throw new CliError(
      `--node-id ${nodeId} is not the certificate's CN ${cn}: the gateway would refuse the registration`,
    );
  const advertiseAddress = flags.advertiseAddress ?? config.advertiseAddress ?? nodeId;
  const stateDir = flags.stateDir ?? config.stateDir;
  const heartbeatMs = flags.heartbeatMs ?? config.heartbeatMs;

  const kernelLogPath = flags.kernelLog ?? config.hardware.kernelLog;
  // Xids name PCI bus ids, which only nvidia-smi tells: none with --gpus-from.
  const kernelLog =
    flags.gpusFrom || kernelLogPath === "off"
      ? undefined
      : openKernelLog({
          path: kernelLogPath,
          onUnreadable: (reason) =>
            logger.warn(
              { path: kernelLogPath, reason },
              "cannot read the kernel log: Xid errors will not be reported (set --kernel-log, or run the agent as root)",
            ),
        });
  const smi = { path: flags.nvidiaSmi, nodeId, config: config.hardware, ...(kernelLog ? { kernelLog } : {}) };
  let hardware: Awaited<ReturnType<typeof discoverFromFile>>;
  try {
    hardware = flags.gpusFrom
      ? await discoverFromFile(flags.gpusFrom, nodeId, config.hardware)
      : await discoverWithNvidiaSmi(smi);
  } catch (err) {
    // Never a registration of hardware the agent is not sure of.
    if (err instanceof GpuDiscoveryError) throw new CliError(err.message);
    throw err;
  }
  const gpus = flags.gpusFrom ? fileSource(flags.gpusFrom) : nvidiaSmiSource(smi);

  let agent: NodeAgent | undefined;
  const supervisor = new EngineSupervisor({
    engines: config.engines,
    stateDir,
    advertiseHost: advertiseAddress,
    logs: config.engineLogs,
    onLogRotated: () => metrics.engineLogRotations.inc(),
    onLogsDeleted: (shards) => metrics.engineLogsDeleted.inc(shards.length),
    warn: (obj, msg) => logger.warn(obj, msg),
    onUnhealthy: (u) => {
      metrics.engineUnhealthy.inc({ action: u.action });
      logger.warn({ shard: u.shardId, reason: u.reason, action: u.action }, "engine unhealthy");
    },
    onLoadFailure: (f) => {
      metrics.engineMetricsFailures.inc({ reason: f.reason });
      // Said once per run of failures: an engine without metrics would fill the log.
      if (f.first)
        logger.warn(
          { shard: f.shardId, reason: f.reason, detail: f.detail },
          "cannot read the engine's metrics: its shard reports no load (see engines.<name>.metrics)",
        );
    },
    onEvent: (e) => {
      logger.info({ shard: e.shardId, state: e.state, exitCode: e.exitCode, error: e.error }, "shard");
      agent?.onShardEvent(e);
    },
  });
  const adopted = await supervisor.adopt();
  metrics.adopted.set(adopted.length);
  logger.info(
    { adopted: adopted.map((s) => s.shardId), stateDir },
    `adopted ${adopted.length} running engines`,
  );
  agent = new NodeAgent({
    nodeId,
    advertiseAddress,
    agentVersion: "llmgw-agent/0.1.0",
    labels: config.labels,
    gateways,
    tls: () => tls?.material,
    heartbeatMs,
    ackTimeoutMs: 10_000,
    reconnectMinMs: 500,
    reconnectMaxMs: 30_000,
    random: () => randomInt(1_000_000) / 1_000_000,
    hardware,
    gpus,
    supervisor,
    metrics,
    logger,
    ...(config.hardware.sampleMs !== undefined ? { gpuSampleMs: config.hardware.sampleMs } : {}),
    gpuSampleFailureThreshold: config.hardware.sampleFailureThreshold,
    problemLedger: fileProblemLedger(stateDir, (obj, msg) => logger.warn(obj, msg)),
  });
  logger.info(
    { nodeId, gpus: hardware.gpus.length, fabrics: hardware.fabrics.map((f) => f.name), gateways },
    "node agent starting",
  );
  const metricsServer = flags.metricsListen
    ? await serveRegistry(metrics.registry, flags.metricsListen)
    : undefined;
  if (metricsServer) logger.info({ url: metricsServer.url }, "metrics listening");
  agent.start();
  await new Promise<void>((resolve) => {
    const onSignal = (sig: NodeJS.Signals) => {
      process.off("SIGTERM", onSignal);
      process.off("SIGINT", onSignal);
      logger.info({ signal: sig }, "stopping; engines keep running and are adopted by the next agent");
      resolve();
    };
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
  });
  await agent.stop();
  await supervisor.close();
  tls?.close();
  kernelLog?.close();
  metricsServer?.server.close();
}
