/** `llmgw api`: serve the operator HTTP API and UI. */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createSecureContext } from "node:tls";
import { type Command, Option } from "commander";
import { type Logger, pino } from "pino";
import { stringify as stringifyYaml } from "yaml";
import { defaultMaxConnections, type Http1LimitsInput } from "../../connection-guard/index.js";
import {
  type ApiTls,
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
  weakTokenReason,
} from "../../operator/index.js";
import type { FleetState } from "../../projections/index.js";
import { openKvSnapshotStore } from "../../projections/runtime/index.js";
import { withArchiveOptions } from "../archive-option.js";
import {
  CliError,
  connectionCapOptions,
  EXIT,
  intOption,
  type NatsSecurityFlags,
  snapshotBucketOption,
  withLogWriterOptions,
} from "../common.js";
import { openLogForWriting } from "../read-log.js";

interface ApiCommandFlags extends NatsSecurityFlags {
  snapshotBucket: string;
  listen: string;
  token?: string;
  tokens?: string;
  dev?: boolean;
  tlsCert?: string;
  tlsKey?: string;
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
  routerUrl?: string[];
}

/** `--router-url`, repeatable: an http(s) base URL, checked when the flag is read. */
function routerUrlArg(value: string, previous: string[] | undefined): string[] {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new CliError(
      `--router-url ${value}: not a URL; give a router's base URL, e.g. http://127.0.0.1:8000`,
    );
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new CliError(`--router-url ${value}: use an http:// or https:// URL`);
  }
  return [...(previous ?? []), value.replace(/\/+$/, "")];
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

/** The certificate and key of `--tls-cert`/`--tls-key`, read and checked (a pair, PEM, matching) before anything starts. */
export function apiTlsFrom(f: { tlsCert?: string; tlsKey?: string }): ApiTls | undefined {
  if (f.tlsCert === undefined && f.tlsKey === undefined) return undefined;
  if (f.tlsCert === undefined || f.tlsKey === undefined) {
    throw new CliError("--tls-cert and --tls-key go together: give both (HTTPS) or neither (plain HTTP)");
  }
  const read = (flag: string, file: string) => {
    try {
      return readFileSync(file);
    } catch (err) {
      throw new CliError(`${flag} ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  };
  const tls = { cert: read("--tls-cert", f.tlsCert), key: read("--tls-key", f.tlsKey) };
  try {
    // Refuses unparsable PEM and a key that is not the certificate's.
    createSecureContext(tls);
  } catch (err) {
    throw new CliError(
      `--tls-cert ${f.tlsCert} and --tls-key ${f.tlsKey} cannot be used together: ${(err as Error).message}`,
    );
  }
  return tls;
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
  const api = withArchiveOptions(withLogWriterOptions(program.command("api")));
  api
    .description("serve the operator HTTP API and the web UI (built into dist/ui by scripts/build-ui)")
    .addOption(
      new Option(
        "--listen <host:port>",
        "address to listen on (loopback unless told otherwise; another address needs --token or --tokens)",
      )
        .env("LLMGW_API_LISTEN")
        .default("127.0.0.1:8080"),
    )
    .addOption(
      new Option(
        "--token <token>",
        'one bearer token with the admin role, recorded as operator "admin" (at least 32 characters, not guessable: llmgw api new-token makes one)',
      ).env("LLMGW_API_TOKEN"),
    )
    .addOption(
      new Option(
        "--tokens <file>",
        "YAML or JSON list of {name, role, sha256} (roles viewer, operator, admin; re-read when it changes); with --token, both work",
      ).env("LLMGW_API_TOKENS"),
    )
    .option(
      "--dev",
      'development: no token, loopback only (recorded as operator "dev"); only requests for a loopback Host from the API\'s own pages, writes with a JSON body',
    )
    .addOption(
      new Option(
        "--router-url <url>",
        "a router (llmgw router) whose per-replica request counts GET /v1/router/requests reads from its /metrics (repeatable)",
      ).argParser(routerUrlArg),
    )
    .addOption(
      new Option("--tls-cert <file>", "serve HTTPS with this certificate (PEM), with --tls-key").env(
        "LLMGW_API_TLS_CERT",
      ),
    )
    .addOption(new Option("--tls-key <file>", "key of --tls-cert (PEM)").env("LLMGW_API_TLS_KEY"))
    .addOption(snapshotBucketOption())
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
      const tls = apiTlsFrom(flags);
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
          ...(tls ? { tls } : {}),
          ...(historySnapshots ? { historySnapshots } : {}),
          ...(flags.routerUrl ? { routerUrls: flags.routerUrl } : {}),
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
  if (flags.token) {
    const weak = weakTokenReason(flags.token);
    if (weak !== undefined) throw new CliError(`--token (LLMGW_API_TOKEN) is too weak: ${weak}`);
  }
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

/** The files `llmgw api init-token` writes into its directory. */
export function initTokenFiles(dir: string, name: string) {
  return { tokens: join(dir, "tokens.yaml"), token: join(dir, `${name}.token`) };
}

/**
 * `llmgw api init-token`: a deployment's first admin token, made on its
 * first start and kept afterwards (compose runs it before the API), so no
 * deployment starts with a token everyone knows.
 */
function initToken(flags: { dir: string; name: string }): void {
  const files = initTokenFiles(flags.dir, flags.name);
  const out = (line: string) => process.stdout.write(`${line}\n`);
  if (existsSync(files.tokens)) {
    out(`kept the API tokens file ${files.tokens}`);
    if (existsSync(files.token)) out(`the ${flags.name} token made on the first start is in ${files.token}`);
    return;
  }
  const token = newToken();
  const entry = checkedEntry({ name: flags.name, role: "admin", sha256: tokenSha256(token) });
  try {
    mkdirSync(flags.dir, { recursive: true, mode: 0o700 });
    // The token first: a tokens file without its token would be kept by the next start, and the token lost.
    writeFileSync(files.token, `${token}\n`, { mode: 0o600 });
    writeFileSync(files.tokens, stringifyYaml([entry]), { mode: 0o644 });
  } catch (err) {
    throw new CliError(`cannot write into ${flags.dir}: ${(err as Error).message}`, EXIT.failure);
  }
  out(`made an admin token named ${flags.name}: it is in ${files.token} (mode 0600, shown nowhere else)`);
  out(`the API reads its hash from ${files.tokens} (--tokens); add more tokens there (llmgw api new-token)`);
}

/** `llmgw api new-token`, `init-token` and `token-hash`: entries for a tokens file. */
function registerTokenCommands(api: Command): void {
  api
    .command("init-token")
    .description(
      "first start of a deployment: make an admin token, write it to DIR/<name>.token (0600) and its hash to DIR/tokens.yaml; kept when tokens.yaml exists",
    )
    .requiredOption("--dir <dir>", "directory of the tokens file and the token")
    .option("--name <name>", "the token's name: the operator the log records for its writes", "admin")
    .action(initToken);
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
    .description(
      "read a token from stdin and print its sha256 as a tokens file stores it (a weak token is refused: at least 32 characters, not guessable)",
    )
    .action(async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
      // A trailing newline (echo, a file) is not part of the token.
      const token = Buffer.concat(chunks)
        .toString("utf8")
        .replace(/\r?\n$/, "");
      const weak = weakTokenReason(token);
      if (weak !== undefined) throw new CliError(`token-hash: the token on stdin is too weak: ${weak}`);
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
