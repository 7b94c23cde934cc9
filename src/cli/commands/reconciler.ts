import { hostname } from "node:os";
import { type Command, Option } from "commander";
import { type Logger, pino } from "pino";
import { ConnectionState } from "../../log/index.js";
import { type FleetState, fleetProjection } from "../../projections/index.js";
import { caughtUp, openKvSnapshotStore, ProjectionRuntime } from "../../projections/runtime/index.js";
import { decide, fitPassBytes, reconcilerConfigSchema } from "../../reconciler/decide/index.js";
import {
  ConfigFileError,
  DEFAULT_ENDPOINTS_BUCKET,
  EndpointsBucket,
  Lease,
  LiveGateways,
  loadConfigFile,
  ReconcilerRunner,
  RunnerMetrics,
} from "../../reconciler/runner/index.js";
import { withArchiveOptions } from "../archive-option.js";
import type { NatsSecurityFlags } from "../common.js";
import { CliError, EXIT, intOption, snapshotBucketOption, withLogWriterOptions } from "../common.js";
import { openLogForWriting } from "../read-log.js";

interface ReconcilerFlags extends NatsSecurityFlags {
  nats: string;
  stream: string;
  streamReplicas: number;
  subjectPrefix: string;
  id: string;
  config?: string;
  policy?: string;
  leaseBucket: string;
  leaseKey: string;
  leaseTtlMs: number;
  gatewaysBucket: string;
  endpointsBucket: string;
  debounceMs: number;
  maxDelayMs: number;
  tickMs: number;
  passTimeoutMs: number;
  snapshots: boolean;
  snapshotBucket: string;
  metricsListen?: string;
  logLevel: string;
}

const env = (name: string) => `LLMGW_RECONCILER_${name}`;

/** How long /readyz waits for the projection to reach the log's end. */
const READY_WAIT_MS = 2000;

/** `llmgw reconciler`: follow the log; when leading, reconcile it until SIGTERM. */
export function registerReconciler(program: Command): void {
  withArchiveOptions(withLogWriterOptions(program.command("reconciler")))
    .description("run a reconciler: one of several leads (KV lease), fenced by the log")
    .addOption(
      new Option("--id <id>", "this reconciler's id, recorded in its passes")
        .env(env("ID"))
        .default(`${hostname()}-${process.pid}`),
    )
    .addOption(
      new Option("--config <file>", "reconciler config (YAML or JSON); absent fields take defaults").env(
        env("CONFIG"),
      ),
    )
    .addOption(
      new Option("--policy <policy>", "placement policy; overrides the config file")
        .choices(["binpack", "spread"])
        .env(env("POLICY")),
    )
    .addOption(
      new Option("--lease-bucket <name>", "KV bucket of the leader lease")
        .env(env("LEASE_BUCKET"))
        .default("llmgw_leases"),
    )
    .addOption(
      new Option("--lease-key <key>", "key of the leader lease").env(env("LEASE_KEY")).default("reconciler"),
    )
    .addOption(
      ms("--lease-ttl-ms", "LEASE_TTL_MS", "lease TTL (the bucket's max age when it is created)", 10_000),
    )
    .addOption(
      new Option("--gateways-bucket <name>", "KV bucket of the gateways' leases (one key per live gateway)")
        .env(env("GATEWAYS_BUCKET"))
        .default("llmgw-gateways"),
    )
    .addOption(
      new Option(
        "--endpoints-bucket <name>",
        "KV bucket the leader keeps the routing table in (one key per model, a JSON list of ready endpoints)",
      )
        .env(env("ENDPOINTS_BUCKET"))
        .default(DEFAULT_ENDPOINTS_BUCKET),
    )
    .addOption(ms("--debounce-ms", "DEBOUNCE_MS", "a pass runs this long after the last new event", 100))
    .addOption(ms("--max-delay-ms", "MAX_DELAY_MS", "... but at most this long after the first", 1_000))
    .addOption(ms("--tick-ms", "TICK_MS", "a pass runs at least this often (safety net)", 10_000))
    .addOption(
      ms("--pass-timeout-ms", "PASS_TIMEOUT_MS", "a pass (append and fold) must finish within", 10_000),
    )
    .addOption(new Option("--no-snapshots", "fold the whole log at start instead of loading a snapshot"))
    .addOption(snapshotBucketOption())
    .addOption(
      new Option(
        "--metrics-listen <host:port>",
        "Prometheus /metrics, with the probes /readyz (connected to NATS and caught up with the log) and /livez, off unless given (host:port; a port alone listens on loopback; 0.0.0.0:PORT for every address; port 0 picks one)",
      ).env(env("METRICS_LISTEN")),
    )
    .addOption(
      new Option("--log-level <level>", "pino log level")
        .choices(["trace", "debug", "info", "warn", "error", "fatal", "silent"])
        .env("LLMGW_LOG_LEVEL")
        .default("info"),
    )
    .action(async (flags: ReconcilerFlags) => {
      await runReconciler(flags);
    });
}

function ms(flag: string, envName: string, what: string, def: number): Option {
  return intOption(flag, env(envName), what, def, "ms");
}

async function runReconciler(flags: ReconcilerFlags): Promise<void> {
  let config: ReturnType<typeof reconcilerConfigSchema.parse>;
  try {
    config = await loadConfigFile(
      reconcilerConfigSchema,
      flags.config,
      flags.policy === undefined ? {} : { policy: flags.policy },
    );
  } catch (err) {
    if (err instanceof ConfigFileError) throw new CliError(err.message, EXIT.usage);
    throw err;
  }
  if (flags.leaseTtlMs < 1_000) throw new CliError("--lease-ttl-ms must be at least 1000");

  const logger: Logger = pino({ level: flags.logLevel, base: { reconciler: flags.id } });
  const metrics = new RunnerMetrics({ defaultMetrics: true });
  const log = await openLogForWriting(flags, `llmgw-reconciler ${flags.id}`, {
    updateStream: false,
    warn: (m) => logger.warn(m),
  });
  // Undone in reverse order on the way out.
  const cleanup: Array<() => unknown> = [() => log.close()];
  const close = async () => {
    for (const c of cleanup.reverse()) await Promise.resolve(c()).catch(() => {});
  };

  let runner: ReconcilerRunner<typeof config> | undefined;
  try {
    const snapshots = flags.snapshots
      ? await openKvSnapshotStore<FleetState>(log, { bucket: flags.snapshotBucket, logger })
      : undefined;
    const projection = new ProjectionRuntime(log, fleetProjection, {
      snapshots: snapshots ?? false,
      logger,
      metrics: metrics.registry,
    });
    cleanup.push(() => projection.stop());
    const gateways = new LiveGateways(log.js, { bucket: flags.gatewaysBucket }, logger);
    cleanup.push(() => gateways.stop());
    const lease = await Lease.open(log.js, {
      bucket: flags.leaseBucket,
      key: flags.leaseKey,
      holderId: flags.id,
      ttlMs: flags.leaseTtlMs,
      replicas: log.replicas,
    });
    if (lease.ttlMs !== flags.leaseTtlMs) {
      logger.warn(
        { bucket: flags.leaseBucket, bucketTtlMs: lease.ttlMs, flagTtlMs: flags.leaseTtlMs },
        "the lease bucket exists with another max age; its own TTL is the one in force",
      );
    }
    const endpoints = await EndpointsBucket.open(log.js, {
      bucket: flags.endpointsBucket,
      replicas: log.replicas,
    });
    await gateways.start();
    await projection.start();
    if (flags.metricsListen !== undefined) {
      // Ready: connected and caught up with the log, leader or standby.
      const connection = new ConnectionState(log.nc);
      const { server, address } = await metrics.listen(flags.metricsListen, () =>
        caughtUp({
          connected: () => connection.up,
          projection,
          logEnd: () => log.lastSeq(),
          waitMs: READY_WAIT_MS,
        }),
      );
      cleanup.push(() => new Promise((r) => server.close(r)));
      logger.info({ metrics: `${address.address}:${address.port}` }, "metrics listening");
    }
    runner = new ReconcilerRunner({
      id: flags.id,
      log,
      projection,
      lease,
      gateways,
      decide,
      config,
      fitToPayload: fitPassBytes,
      logger,
      metrics,
      endpoints,
      triggers: { debounceMs: flags.debounceMs, maxDelayMs: flags.maxDelayMs, tickMs: flags.tickMs },
      passTimeoutMs: flags.passTimeoutMs,
    });
    const r = runner;
    logger.info(
      {
        seq: projection.lastSeq,
        leaseBucket: flags.leaseBucket,
        leaseTtlMs: lease.ttlMs,
        policy: config.policy,
      },
      "reconciler following the log",
    );
    const exitCode = await new Promise<number>((resolve) => {
      const onSignal = (sig: NodeJS.Signals) => {
        logger.info({ signal: sig }, "shutting down");
        resolve(EXIT.ok);
      };
      process.once("SIGTERM", onSignal);
      process.once("SIGINT", onSignal);
      projection.onError((err) => {
        // A reconciler that no longer follows the log must not lead.
        logger.fatal({ err: err.message }, "the projection stopped following the log");
        resolve(EXIT.failure);
      });
      r.start();
    });
    // Leave even if something below hangs: the lease then simply expires.
    setTimeout(() => process.exit(exitCode || EXIT.failure), 10_000).unref();
    await runner.stop();
    await close();
    process.exitCode = exitCode;
  } catch (err) {
    await runner?.stop();
    await close();
    throw err;
  }
}
