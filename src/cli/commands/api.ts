/** `llmgw api`: serve the operator HTTP API and UI. */
import { type Command, Option } from "commander";
import { type Logger, pino } from "pino";
import { stringify as stringifyYaml } from "yaml";
import { defaultMaxConnections, type Http1LimitsInput } from "../../connection-guard/index.js";
import {
  type ApiToken,
  type AuthMode,
  adminTokenEntry,
  checkAuth,
  newToken,
  parseApiLimits,
  ROLES,
  type Role,
  readTokensFile,
  startApi,
  TokensFileError,
  TokenTable,
  tokenEntrySchema,
  tokenSha256,
  watchTokensFile,
} from "../../operator/index.js";
import type { FleetState } from "../../projections/index.js";
import { openKvSnapshotStore } from "../../projections/runtime/index.js";
import {
  CliError,
  connectionCapOptions,
  intOption,
  type NatsSecurityFlags,
  prefixOption,
  snapshotBucketOption,
  streamOption,
  streamReplicasOption,
  withNatsOptions,
} from "../common.js";
import { openLogForWriting } from "../read-log.js";

interface ApiCommandFlags extends NatsSecurityFlags {
  snapshotBucket: string;
  listen: string;
  token?: string;
  tokens?: string;
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
  return intOption(flag, `LLMGW_API_${env}`, what, def);
}

function ms(flag: string, env: string, what: string, def: number): Option {
  return intOption(flag, `LLMGW_API_${env}`, what, def, "ms");
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
  const caps = connectionCapOptions("LLMGW_API_", defaultMaxConnections(4096));
  const api = withNatsOptions(program.command("api"));
  api
    .description("serve the operator HTTP API and the web UI (built into dist/ui by scripts/build-ui)")
    .addOption(
      new Option("--listen <host:port>", "address to listen on")
        .env("LLMGW_API_LISTEN")
        .default("127.0.0.1:8080"),
    )
    .addOption(
      new Option("--token <token>", 'one bearer token with the admin role, recorded as operator "admin"').env(
        "LLMGW_API_TOKEN",
      ),
    )
    .addOption(
      new Option(
        "--tokens <file>",
        "YAML or JSON list of {name, role, sha256} (roles viewer, operator, admin; re-read when it changes); with --token, both work",
      ).env("LLMGW_API_TOKENS"),
    )
    .option("--dev", 'development: no token, loopback only (recorded as operator "dev")')
    .addOption(streamOption())
    .addOption(streamReplicasOption())
    .addOption(snapshotBucketOption())
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
    .addOption(caps[0])
    .addOption(caps[1])
    .addOption(
      num("--max-header-bytes", "MAX_HEADER_BYTES", "largest request header block, bytes", 16 * 1024),
    )
    .addOption(num("--body-limit", "BODY_LIMIT_BYTES", "largest request body, bytes", 4 * 1024 * 1024))
    .action(async (flags: ApiCommandFlags) => {
      const { host, port } = parseListen(flags.listen);
      const limits = limitsFrom(flags);
      if (!flags.dev && !flags.token && !flags.tokens) {
        throw new CliError(
          "llmgw api needs --tokens FILE or --token (or LLMGW_API_TOKENS, LLMGW_API_TOKEN), or --dev on a loopback address",
        );
      }
      if (flags.dev && (flags.token || flags.tokens)) {
        throw new CliError("--dev runs without tokens; drop --token/--tokens or --dev");
      }
      const logger = pino({ level: flags.logLevel, base: { service: "llmgw-api" } });
      const { auth, stopWatching } = authFrom(flags, logger);
      try {
        checkAuth(host, auth);
      } catch (err) {
        stopWatching();
        throw new CliError((err as Error).message);
      }
      const log = await openLogForWriting(flags, "llmgw-api", {
        updateStream: true,
        warn: (m) => logger.warn(m),
      });
      let server: Awaited<ReturnType<typeof startApi>>;
      try {
        // The reconciler's snapshots (read-only, when it keeps any) let the time slider start a jump near its target.
        const historySnapshots = await openKvSnapshotStore<FleetState>(log, {
          bucket: flags.snapshotBucket,
          create: false,
          logger,
        }).catch(() => undefined);
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
      stopWatching();
      await server.close();
      await log.close();
    });
  registerTokenCommands(api);
}

/** The auth mode the flags ask for; a tokens file is watched for changes until `stopWatching`. */
function authFrom(flags: ApiCommandFlags, logger: Logger): { auth: AuthMode; stopWatching(): void } {
  if (flags.dev) return { auth: { kind: "dev" }, stopWatching: () => {} };
  if (!flags.tokens) return { auth: { kind: "token", token: flags.token ?? "" }, stopWatching: () => {} };
  const extra: ApiToken[] = flags.token ? [adminTokenEntry(flags.token)] : [];
  let tokens: ApiToken[];
  try {
    tokens = readTokensFile(flags.tokens, extra);
  } catch (err) {
    if (err instanceof TokensFileError)
      throw new CliError(`--tokens: ${err.message.replaceAll("\n", "\n--tokens: ")}`);
    throw err;
  }
  const table = new TokenTable(tokens);
  const stopWatching = watchTokensFile(flags.tokens, { extra, logger, apply: (t) => table.replace(t) });
  return { auth: { kind: "tokens", tokens: table }, stopWatching };
}

/** `llmgw api new-token` and `llmgw api token-hash`: entries for a tokens file. */
function registerTokenCommands(api: Command): void {
  api
    .command("new-token")
    .description("print a new random token (once: it is not stored) and its entry for the --tokens file")
    .requiredOption("--name <name>", "the token's name: the operator the log records for its writes")
    .addOption(new Option("--role <role>", "what the token may do").choices([...ROLES]).makeOptionMandatory())
    .action((flags: { name: string; role: Role }) => {
      const token = newToken();
      const entry = checkedEntry({ name: flags.name, role: flags.role, sha256: tokenSha256(token) });
      process.stdout.write(
        `token (give it to its holder; it is not shown again):\n${token}\n\n` +
          `entry for the tokens file:\n${stringifyYaml([entry])}`,
      );
    });
  api
    .command("token-hash")
    .description("read a token from stdin and print its sha256 as a tokens file stores it")
    .action(async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
      // A trailing newline (echo, a file) is not part of the token.
      const token = Buffer.concat(chunks)
        .toString("utf8")
        .replace(/\r?\n$/, "");
      if (token.length < 8)
        throw new CliError("token-hash: the token on stdin must be at least 8 characters");
      process.stdout.write(`${tokenSha256(token)}\n`);
    });
}

function checkedEntry(entry: ApiToken): ApiToken {
  const r = tokenEntrySchema.safeParse(entry);
  if (!r.success) {
    throw new CliError(r.error.issues.map((i) => `--${String(i.path[0])}: ${i.message}`).join("\n"));
  }
  return r.data;
}
