/** `llmgw router`: the OpenAI-compatible data plane that follows the routing table (docs/router.md). */

import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { type Command, Option } from "commander";
import { type Logger, pino } from "pino";
import { connectNats } from "../../log/index.js";
import { parseListen } from "../../metrics-endpoint/index.js";
import { DEFAULT_ENDPOINTS_BUCKET } from "../../reconciler/runner/index.js";
import {
  ApiKeys,
  ApiKeysFileError,
  CONFIG_FLAGS,
  LoadFeed,
  ReplicaBook,
  type RouterConfig,
  RouterMetrics,
  RoutingTable,
  readApiKeysFile,
  routerConfigSchema,
  startRouterServer,
  TableFollower,
  watchApiKeysFile,
} from "../../router/index.js";
import { CliError, EXIT, intOption, type NatsSecurityFlags, withLogLocationOptions } from "../common.js";
import { natsSecurityFrom } from "../nats-security.js";

interface RouterFlags extends NatsSecurityFlags {
  nats: string;
  listen: string;
  endpointsBucket: string;
  stream: string;
  subjectPrefix: string;
  loadFeed: boolean;
  loadLookbackMs: number;
  apiKeys?: string;
  maxBodyBytes: number;
  maxHeaderBytes: number;
  maxConcurrentPerClient: number;
  retries: number;
  ejectMs: number;
  retryAfterSeconds: number;
  affinity: "none" | "prefix";
  affinityChars: number;
  retryBodyBytes: number;
  logLevel: string;
}

const env = (name: string) => `LLMGW_ROUTER_${name}`;
const DEFAULTS = routerConfigSchema.parse({});

export function registerRouter(program: Command): void {
  withLogLocationOptions(program.command("router"))
    .description(
      "serve the OpenAI API (chat/completions, completions, embeddings, models) to the ready replicas of the routing table",
    )
    .addOption(
      new Option("--listen <host:port>", "OpenAI API, /healthz and /metrics listener")
        .env(env("LISTEN"))
        .default("127.0.0.1:8000"),
    )
    .addOption(
      new Option(
        "--endpoints-bucket <name>",
        "KV bucket of the routing table (the reconciler's --endpoints-bucket)",
      )
        .env(env("ENDPOINTS_BUCKET"))
        .default(DEFAULT_ENDPOINTS_BUCKET),
    )
    .addOption(
      new Option(
        "--no-load-feed",
        "weigh replicas by this router's requests in flight only (by default also by the queue depth and KV-cache use they report, read from the log)",
      ),
    )
    .addOption(
      intOption(
        "--load-lookback-ms",
        env("LOAD_LOOKBACK_MS"),
        "load reports read back at start",
        120_000,
        "ms",
      ),
    )
    .addOption(
      new Option(
        "--api-keys <file>",
        "API keys (YAML or JSON list of {name, sha256, models?, requestsPerMinute?}); re-read when it changes. Without: no key asked for",
      ).env(env("API_KEYS")),
    )
    .addOption(
      size("--max-body-bytes", "MAX_BODY_BYTES", "largest request body (larger: 413)", DEFAULTS.maxBodyBytes),
    )
    .addOption(
      size(
        "--max-header-bytes",
        "MAX_HEADER_BYTES",
        "largest request head (larger: 431)",
        DEFAULTS.maxHeaderBytes,
      ),
    )
    .addOption(
      size(
        "--max-concurrent-per-client",
        "MAX_CONCURRENT_PER_CLIENT",
        "requests in flight per client: API key, or address without keys (more: 429)",
        DEFAULTS.maxConcurrentPerClient,
      ),
    )
    .addOption(
      size(
        "--retries",
        "RETRIES",
        "other replicas tried when one refuses, resets or answers 503 before the first response byte",
        DEFAULTS.retries,
      ),
    )
    .addOption(
      intOption(
        "--eject-ms",
        env("EJECT_MS"),
        "a replica that failed is kept out this long",
        DEFAULTS.ejectMs,
        "ms",
      ),
    )
    .addOption(
      size(
        "--retry-after-seconds",
        "RETRY_AFTER_SECONDS",
        "Retry-After of the 503 for a model with no ready replica",
        DEFAULTS.retryAfterSeconds,
      ),
    )
    .addOption(
      new Option(
        "--affinity <kind>",
        "prefix: requests sharing a prompt's first --affinity-chars characters go to the same replica while it is not overloaded (KV-cache reuse; bodies are then read whole before forwarding)",
      )
        .choices(["none", "prefix"])
        .env(env("AFFINITY"))
        .default("none"),
    )
    .addOption(
      size(
        "--affinity-chars",
        "AFFINITY_CHARS",
        "prompt characters the affinity key is made of",
        DEFAULTS.affinityChars,
      ),
    )
    .addOption(
      size(
        "--retry-body-bytes",
        "RETRY_BODY_BYTES",
        "body bytes kept to send again on a retry (a larger body is not retried)",
        DEFAULTS.retryBodyBytes,
      ),
    )
    .addOption(
      new Option("--log-level <level>", "pino log level (info logs every request: the access log)")
        .choices(["trace", "debug", "info", "warn", "error", "fatal", "silent"])
        .env("LLMGW_LOG_LEVEL")
        .default("info"),
    )
    .addHelpText(
      "after",
      "\nThe table comes from the endpoints bucket (direct gets, no consumer, read-only: the router role\n" +
        "of llmgw nats-auth). A replica that leaves it gets no new request; through a NATS outage the last\n" +
        'table is served and /healthz says "stale". Errors: unknown model 404, no ready replica 503 with\n' +
        "Retry-After, bad body 400, body too large 413, over a limit 429. See docs/router.md.",
    )
    .action(async (flags: RouterFlags) => {
      await runRouter(flags);
    });
}

function size(flag: string, envName: string, what: string, def: number): Option {
  return intOption(flag, env(envName), what, def);
}

function configFrom(flags: RouterFlags): RouterConfig {
  const parsed = routerConfigSchema.safeParse({
    maxBodyBytes: flags.maxBodyBytes,
    maxHeaderBytes: flags.maxHeaderBytes,
    maxConcurrentPerClient: flags.maxConcurrentPerClient,
    retries: flags.retries,
    ejectMs: flags.ejectMs,
    retryAfterSeconds: flags.retryAfterSeconds,
    affinity: flags.affinity,
    affinityChars: flags.affinityChars,
    retryBodyBytes: flags.retryBodyBytes,
  });
  if (!parsed.success) {
    const i = parsed.error.issues[0]!;
    const field = String(i.path[0]) as keyof RouterConfig;
    throw new CliError(`${CONFIG_FLAGS[field] ?? field}: ${i.message}`, EXIT.usage);
  }
  return parsed.data;
}

async function runRouter(flags: RouterFlags): Promise<void> {
  const config = configFrom(flags);
  let listen: { host: string; port: number };
  try {
    listen = parseListen(flags.listen);
  } catch (err) {
    throw new CliError(`--listen: ${(err as Error).message}`, EXIT.usage);
  }
  let apiKeys: ApiKeys | undefined;
  if (flags.apiKeys !== undefined) {
    try {
      apiKeys = new ApiKeys(readApiKeysFile(flags.apiKeys));
    } catch (err) {
      if (err instanceof ApiKeysFileError) throw new CliError(`--api-keys ${err.message}`, EXIT.usage);
      throw err;
    }
  }
  const logger: Logger = pino({ level: flags.logLevel, base: { part: "router" } });
  const metrics = new RouterMetrics({ defaultMetrics: true });
  const security = natsSecurityFrom(flags);
  const nc = await connectNats({ url: flags.nats, name: "llmgw-router", security });
  const cleanup: Array<() => unknown> = [() => nc.close()];
  const close = async () => {
    for (const c of cleanup.reverse()) await Promise.resolve(c()).catch(() => {});
  };
  try {
    const table = new RoutingTable();
    const book = new ReplicaBook();
    table.onChange((c) => {
      metrics.tableChanges.inc();
      metrics.tableEndpoints.set({ model: c.model }, c.after.length);
      book.forget(new Set(Object.values(table.snapshot()).flatMap((l) => l.map((e) => e.replicaId))));
      logger.info(
        { model: c.model, endpoints: c.after.map((e) => `${e.replicaId}@${e.url}`) },
        "routing table changed",
      );
    });
    metrics.tableStale.set(1);
    const follower = new TableFollower(nc, table, {
      bucket: flags.endpointsBucket,
      logger,
      onStale: (stale) => metrics.tableStale.set(stale ? 1 : 0),
      onApplied: (writtenMs) => metrics.tableApplyDelay.observe(Math.max(0, Date.now() - writtenMs) / 1000),
    });
    cleanup.push(() => follower.stop());
    void follower.start();
    if (flags.loadFeed) {
      const feed = new LoadFeed(jetstream(nc), await jetstreamManager(nc), book, {
        stream: flags.stream,
        prefix: flags.subjectPrefix,
        lookbackMs: flags.loadLookbackMs,
        logger,
      });
      feed.start();
      cleanup.push(() => feed.stop());
    }
    if (apiKeys && flags.apiKeys) cleanup.push(watchApiKeysFile(flags.apiKeys, apiKeys, logger));
    const server = await startRouterServer({
      ...listen,
      table,
      status: follower,
      book,
      config,
      metrics,
      logger,
      ...(apiKeys ? { apiKeys } : {}),
    });
    cleanup.push(() => server.close());
    logger.info(
      {
        url: server.url,
        bucket: flags.endpointsBucket,
        apiKeys: apiKeys !== undefined,
        affinity: config.affinity,
      },
      "router listening",
    );
    await new Promise<void>((resolve) => {
      const onSignal = (sig: NodeJS.Signals) => {
        logger.info({ signal: sig }, "shutting down");
        resolve();
      };
      process.once("SIGTERM", onSignal);
      process.once("SIGINT", onSignal);
    });
    setTimeout(() => process.exit(EXIT.ok), 10_000).unref();
    await close();
  } catch (err) {
    await close();
    throw err;
  }
}
