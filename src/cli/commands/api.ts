/** `llmgw api`: serve the operator HTTP API and UI. */
import { type Command, Option } from "commander";
import { pino } from "pino";
import { defaultMaxConnections, type Http1LimitsInput } from "../../connection-guard/index.js";
import { type AuthMode, checkAuth, parseApiLimits, startApi } from "../../operator/index.js";
import type { FleetState } from "../../projections/index.js";
import { openKvSnapshotStore } from "../../projections/runtime/index.js";
import {
  CliError,
  intArg,
  type NatsSecurityFlags,
  prefixOption,
  streamOption,
  streamReplicasOption,
  withNatsOptions,
} from "../common.js";
import { openLogForWriting } from "../read-log.js";

interface ApiCommandFlags extends NatsSecurityFlags {
  listen: string;
  token?: string;
  dev?: boolean;
  nats: string;
  stream: string;
  subjectPrefix: string;
  streamReplicas: number;
  logLevel: string;
  headersTimeout: number;
  requestTimeout: number;
  keepAliveTimeout: number;
  maxRequestsPerSocket: number;
  maxConnections: number;
  maxConnectionsPerAddress: number;
  maxHeaderBytes: number;
  bodyLimit: number;
}

function num(flag: string, env: string, what: string, def: number): Option {
  return new Option(`${flag} <n>`, what).env(`LLMGW_API_${env}`).default(def).argParser(intArg(flag));
}

function ms(flag: string, env: string, what: string, def: number): Option {
  return num(flag, env, `${what} (ms)`, def);
}

function limitsFrom(f: ApiCommandFlags): Http1LimitsInput {
  const limits: Http1LimitsInput = {
    headersTimeoutMs: f.headersTimeout,
    requestTimeoutMs: f.requestTimeout,
    keepAliveTimeoutMs: f.keepAliveTimeout,
    maxRequestsPerSocket: f.maxRequestsPerSocket,
    maxConnections: f.maxConnections,
    maxConnectionsPerAddress: f.maxConnectionsPerAddress,
    maxHeaderBytes: f.maxHeaderBytes,
    bodyLimitBytes: f.bodyLimit,
  };
  try {
    parseApiLimits(limits);
  } catch (err) {
    throw new CliError((err as Error).message);
  }
  return limits;
}

/** HOST:PORT, with IPv6 hosts in brackets. */
export function parseListen(value: string): { host: string; port: number } {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(value.trim());
  const host = m?.[1] ?? m?.[2];
  const port = Number(m?.[3]);
  if (!host || !(port >= 0 && port <= 65535)) {
    throw new CliError(
      `--listen must be HOST:PORT (e.g. 127.0.0.1:8080 or [::1]:8080), got ${JSON.stringify(value)}`,
    );
  }
  return { host, port };
}

export function registerApi(program: Command): void {
  withNatsOptions(program.command("api"))
    .description("serve the operator HTTP API and the web UI (built into dist/ui by scripts/build-ui)")
    .addOption(
      new Option("--listen <host:port>", "address to listen on")
        .env("LLMGW_API_LISTEN")
        .default("127.0.0.1:8080"),
    )
    .addOption(new Option("--token <token>", "bearer token clients must send").env("LLMGW_API_TOKEN"))
    .option("--dev", "development: no token, loopback only")
    .addOption(streamOption())
    .addOption(streamReplicasOption())
    .addOption(prefixOption())
    .addOption(
      new Option("--log-level <level>", "log level")
        .choices(["trace", "debug", "info", "warn", "error", "silent"])
        .default("info"),
    )
    .addOption(
      ms("--headers-timeout", "HEADERS_TIMEOUT_MS", "a request's headers must arrive within", 10_000),
    )
    .addOption(
      ms(
        "--request-timeout",
        "REQUEST_TIMEOUT_MS",
        "a whole request (not its response) must arrive within",
        30_000,
      ),
    )
    .addOption(
      ms("--keep-alive-timeout", "KEEP_ALIVE_TIMEOUT_MS", "close an idle keep-alive connection after", 5_000),
    )
    .addOption(
      num(
        "--max-requests-per-socket",
        "MAX_REQUESTS_PER_SOCKET",
        "requests per connection before it closes (0: no limit)",
        1_000,
      ),
    )
    .addOption(
      num(
        "--max-connections",
        "MAX_CONNECTIONS",
        "connections open at once (default 4096, lowered below the file-descriptor limit)",
        defaultMaxConnections(4096),
      ),
    )
    .addOption(
      num(
        "--max-connections-per-address",
        "MAX_CONNECTIONS_PER_ADDRESS",
        "connections open at once from one address",
        256,
      ),
    )
    .addOption(
      num("--max-header-bytes", "MAX_HEADER_BYTES", "largest request header block, bytes", 16 * 1024),
    )
    .addOption(num("--body-limit", "BODY_LIMIT_BYTES", "largest request body, bytes", 4 * 1024 * 1024))
    .action(async (flags: ApiCommandFlags) => {
      const { host, port } = parseListen(flags.listen);
      const limits = limitsFrom(flags);
      if (!flags.dev && !flags.token) {
        throw new CliError("llmgw api needs --token (or LLMGW_API_TOKEN), or --dev on a loopback address");
      }
      const auth: AuthMode = flags.dev ? { kind: "dev" } : { kind: "token", token: flags.token ?? "" };
      try {
        checkAuth(host, auth);
      } catch (err) {
        throw new CliError((err as Error).message);
      }
      const logger = pino({ level: flags.logLevel, base: { service: "llmgw-api" } });
      const log = await openLogForWriting(flags, "llmgw-api", { updateStream: true });
      let server: Awaited<ReturnType<typeof startApi>>;
      try {
        // The reconciler's snapshots (read-only, when it keeps any) let the time slider start a jump near its target.
        const historySnapshots = await openKvSnapshotStore<FleetState>(log, { create: false, logger }).catch(
          () => undefined,
        );
        server = await startApi({
          log,
          host,
          port,
          auth,
          logger,
          limits,
          ...(historySnapshots ? { historySnapshots } : {}),
        });
      } catch (err) {
        await log.close();
        throw err;
      }
      await new Promise<void>((resolve) => {
        const stop = (signal: string) => {
          logger.info({ signal }, `stopping on ${signal}`);
          resolve();
        };
        process.once("SIGINT", () => stop("SIGINT"));
        process.once("SIGTERM", () => stop("SIGTERM"));
      });
      await server.close();
      await log.close();
    });
}
