import { hostname } from "node:os";
import { type Command, Option } from "commander";
import { defaultMaxConnections, RESET_WINDOW_MS } from "../../connection-guard/index.js";
import {
  DEFAULT_PUBLISH_WINDOW,
  DEFAULT_REVOKED_BUCKET,
  Gateway,
  type GatewayConfigInput,
  GatewayMetrics,
  parseGatewayConfig,
} from "../../gateway/index.js";
import { TlsFilesError } from "../../tls/watched-files.js";
import {
  CliError,
  connectionCapOptions,
  intOption,
  type NatsSecurityFlags,
  withLogWriterOptions,
} from "../common.js";
import { natsSecurityFrom } from "../nats-security.js";

interface GatewayFlags extends NatsSecurityFlags {
  id: string;
  listen: string;
  tlsCert?: string;
  tlsKey?: string;
  clientCa?: string;
  insecureDev?: boolean;
  nats: string;
  stream: string;
  subjectPrefix: string;
  streamReplicas: number;
  heartbeatTimeout: number;
  registrationTimeout: number;
  readMaxBytes: number;
  connectHandlerOnly?: boolean;
  sendQueue: number;
  publishWindow: number;
  streamWindow: number;
  ackEvery: number;
  ackDelay: number;
  publishTimeout: number;
  logUnavailableLimit: number;
  usageThresholdMb: number;
  usageInterval: number;
  eventBudget: number;
  eventBudgetBurst: number;
  byteBudget: number;
  byteBudgetBurst: number;
  maxOutputChars: number;
  maxTextChars: number;
  reconnectLimit: number;
  reconnectBurst: number;
  leaseBucket: string;
  leaseTtl: number;
  drainDeadline: number;
  reconnectAfter: number;
  revokedBucket: string;
  duplicateRetryAfter: number;
  metricsListen?: string;
  handshakeTimeout: number;
  firstStreamTimeout: number;
  idleSessionTimeout: number;
  unauthenticatedGrace: number;
  maxConnections: number;
  maxConnectionsPerAddress: number;
  maxConcurrentStreams: number;
  maxStreamResets: number;
  maxHeaderBytes: number;
}

const env = (name: string) => `LLMGW_GATEWAY_${name}`;

/** `llmgw gateway`: serve agent streams and relay commands until SIGTERM. */
export function registerGateway(program: Command): void {
  const caps = connectionCapOptions("LLMGW_GATEWAY_", defaultMaxConnections(4096));
  withLogWriterOptions(program.command("gateway"))
    .description("serve agent streams (Connect over HTTP/2, mTLS) and relay commands")
    .addOption(
      new Option("--id <id>", "gateway id (letters, digits, - and _)").env(env("ID")).default(defaultId()),
    )
    .addOption(
      new Option("--listen <host:port>", "agent listener").env(env("LISTEN")).default("127.0.0.1:7443"),
    )
    .addOption(
      new Option(
        "--tls-cert <file>",
        "server certificate (PEM); it, the key and the client CA are read again when they change",
      ).env(env("TLS_CERT")),
    )
    .addOption(new Option("--tls-key <file>", "server key (PEM)").env(env("TLS_KEY")))
    .addOption(
      new Option("--client-ca <file>", "CA that signs agent certificates (PEM)").env(env("CLIENT_CA")),
    )
    .addOption(
      new Option(
        "--insecure-dev",
        "h2c on loopback, node identity from the message: local development only",
      ).env(env("INSECURE_DEV")),
    )
    .addOption(ms("--heartbeat-timeout", "HEARTBEAT_TIMEOUT_MS", "close a stream silent this long", 15_000))
    .addOption(
      ms("--registration-timeout", "REGISTRATION_TIMEOUT_MS", "a stream must register within", 10_000),
    )
    .addOption(
      num(
        "--read-max-bytes",
        "READ_MAX_BYTES",
        "largest agent message accepted (capped to the NATS server's max_payload minus 8 KiB)",
        1024 * 1024,
      ),
    )
    .addOption(
      new Option(
        "--connect-handler-only",
        "serve every agent stream through Connect's handler (by default binary gRPC and Connect streams are framed directly)",
      ).env(env("CONNECT_HANDLER_ONLY")),
    )
    .addOption(
      num("--send-queue", "SEND_QUEUE", "messages queued per agent before it counts as too slow", 256),
    )
    .addOption(
      num("--publish-window", "PUBLISH_WINDOW", "publishes in flight to JetStream", DEFAULT_PUBLISH_WINDOW),
    )
    .addOption(
      num(
        "--stream-window",
        "STREAM_WINDOW",
        "events of one agent stream queued or in flight (its reading waits past this), published in order",
        32,
      ),
    )
    .addOption(
      num(
        "--ack-every",
        "ACK_EVERY",
        "cumulative acks: one ack per this many stored messages while more of the stream's are on their way to the log",
        16,
      ),
    )
    .addOption(
      ms(
        "--ack-delay",
        "ACK_DELAY_MS",
        "cumulative acks: ... or once the oldest waited this long (an idle stream is acked at once)",
        20,
      ),
    )
    .addOption(ms("--publish-timeout", "PUBLISH_TIMEOUT_MS", "ack wait of one publish attempt", 5_000))
    .addOption(
      ms(
        "--log-unavailable-limit",
        "LOG_UNAVAILABLE_LIMIT_MS",
        "close streams when the log is down this long",
        30_000,
      ),
    )
    .addOption(
      num("--usage-threshold-mb", "USAGE_THRESHOLD_MB", "GPU memory move that makes a usage event", 1024),
    )
    .addOption(
      ms(
        "--usage-interval",
        "USAGE_INTERVAL_MS",
        "at most one usage event per session this often, the latest values winning",
        3_000,
      ),
    )
    .addOption(
      num(
        "--event-budget",
        "EVENT_BUDGET",
        "events one session may write a minute; past it the session is closed (ResourceExhausted)",
        600,
      ),
    )
    .addOption(num("--event-budget-burst", "EVENT_BUDGET_BURST", "events one session may write at once", 600))
    .addOption(
      num(
        "--byte-budget",
        "BYTE_BUDGET",
        "bytes of events one session may write a minute; past it the session is closed (ResourceExhausted)",
        1024 * 1024,
      ),
    )
    .addOption(
      num(
        "--byte-budget-burst",
        "BYTE_BUDGET_BURST",
        "bytes of events one session may write at once",
        2 * 1024 * 1024,
      ),
    )
    .addOption(
      num(
        "--max-output-chars",
        "MAX_OUTPUT_CHARS",
        "characters of a shard's last output kept; longer is cut with a marker",
        4096,
      ),
    )
    .addOption(
      num(
        "--max-text-chars",
        "MAX_TEXT_CHARS",
        "characters of every other free-text field an agent sends (errors, labels, GPU names, problems); longer is cut with a marker",
        1024,
      ),
    )
    .addOption(
      num(
        "--reconnect-limit",
        "RECONNECT_LIMIT",
        "registrations one node may make a minute on this gateway; past it ResourceExhausted with a retry time",
        60,
      ),
    )
    .addOption(num("--reconnect-burst", "RECONNECT_BURST", "registrations one node may make at once", 30))
    .addOption(
      new Option("--lease-bucket <name>", "KV bucket of gateway leases")
        .env(env("LEASE_BUCKET"))
        .default("llmgw-gateways"),
    )
    .addOption(ms("--lease-ttl", "LEASE_TTL_MS", "lease time-to-live", 15_000))
    .addOption(ms("--drain-deadline", "DRAIN_DEADLINE_MS", "SIGTERM: exit within", 10_000))
    .addOption(
      ms(
        "--reconnect-after",
        "RECONNECT_AFTER_MS",
        "SIGTERM: the retry_after told to agents, so they do not all come back at once",
        1_000,
      ),
    )
    .addOption(
      new Option("--revoked-bucket <name>", "KV bucket of revoked agent CNs and certificate serials")
        .env(env("REVOKED_BUCKET"))
        .default(DEFAULT_REVOKED_BUCKET),
    )
    .addOption(
      ms(
        "--duplicate-retry-after",
        "DUPLICATE_RETRY_AFTER_MS",
        "the retry_after told to a second agent presenting the identity of a live session",
        5_000,
      ),
    )
    .addOption(
      new Option(
        "--metrics-listen <host:port>",
        "Prometheus /metrics, with the probes /readyz (serving and connected to NATS) and /livez, off unless given (host:port; a port alone listens on loopback; 0.0.0.0:PORT for every address)",
      ).env(env("METRICS_LISTEN")),
    )
    .addOption(
      ms("--handshake-timeout", "HANDSHAKE_TIMEOUT_MS", "the TLS handshake must finish within", 5_000),
    )
    .addOption(
      ms(
        "--first-stream-timeout",
        "FIRST_STREAM_TIMEOUT_MS",
        "after TLS, the HTTP/2 preface and the first stream must come within",
        5_000,
      ),
    )
    .addOption(
      ms(
        "--idle-session-timeout",
        "IDLE_SESSION_TIMEOUT_MS",
        "close a connection with no open stream after",
        15_000,
      ),
    )
    .addOption(
      ms(
        "--unauthenticated-grace",
        "UNAUTHENTICATED_GRACE_MS",
        "a connection without a verified client certificate gets its one Unauthenticated answer and is closed within",
        2_000,
      ),
    )
    .addOption(caps[0])
    .addOption(caps[1])
    .addOption(
      num(
        "--max-concurrent-streams",
        "MAX_CONCURRENT_STREAMS",
        "HTTP/2 streams open at once per connection",
        100,
      ),
    )
    .addOption(
      num(
        "--max-stream-resets",
        "MAX_STREAM_RESETS",
        `stream resets per connection in ${RESET_WINDOW_MS / 1000} s before it is destroyed (rapid reset)`,
        100,
      ),
    )
    .addOption(num("--max-header-bytes", "MAX_HEADER_BYTES", "largest request header list, bytes", 16 * 1024))
    .action(async (flags: GatewayFlags) => {
      let gw: Gateway;
      try {
        gw = await Gateway.start(configFrom(flags), {
          metrics: new GatewayMetrics().withProcessMetrics(),
          natsSecurity: natsSecurityFrom(flags),
        });
      } catch (err) {
        if (err instanceof TlsFilesError) throw new CliError(err.message);
        throw err;
      }
      await new Promise<void>((resolve) => {
        const onSignal = (sig: NodeJS.Signals) => {
          process.off("SIGTERM", onSignal);
          process.off("SIGINT", onSignal);
          // Past the deadline something is stuck: leave anyway, the lease expires.
          setTimeout(() => process.exit(1), gw.config.drainDeadlineMs + 2_000).unref();
          gw.drain(`received ${sig}`).then(resolve, resolve);
        };
        process.on("SIGTERM", onSignal);
        process.on("SIGINT", onSignal);
      });
    });
}

function configFrom(f: GatewayFlags): GatewayConfigInput {
  const tlsFiles = [f.tlsCert, f.tlsKey, f.clientCa];
  if (f.insecureDev && tlsFiles.some((x) => x !== undefined)) {
    throw new CliError("--insecure-dev takes no --tls-cert, --tls-key or --client-ca");
  }
  if (!f.insecureDev && tlsFiles.some((x) => x === undefined)) {
    throw new CliError(
      "llmgw gateway needs --tls-cert, --tls-key and --client-ca (or --insecure-dev for local development on loopback)",
    );
  }
  const input: GatewayConfigInput = {
    id: f.id,
    listen: f.listen,
    insecureDev: f.insecureDev === true,
    tlsFiles: f.insecureDev ? undefined : { cert: f.tlsCert!, key: f.tlsKey!, clientCa: f.clientCa! },
    nats: f.nats,
    stream: f.stream,
    prefix: f.subjectPrefix,
    streamReplicas: f.streamReplicas,
    heartbeatTimeoutMs: f.heartbeatTimeout,
    registrationTimeoutMs: f.registrationTimeout,
    readMaxBytes: f.readMaxBytes,
    directStreams: f.connectHandlerOnly !== true,
    sendQueueMax: f.sendQueue,
    publishWindow: f.publishWindow,
    streamWindow: f.streamWindow,
    ackEvery: f.ackEvery,
    ackDelayMs: f.ackDelay,
    publishTimeoutMs: f.publishTimeout,
    logUnavailableLimitMs: f.logUnavailableLimit,
    usageThresholdMb: f.usageThresholdMb,
    usageIntervalMs: f.usageInterval,
    eventBudgetPerMinute: f.eventBudget,
    eventBudgetBurst: f.eventBudgetBurst,
    byteBudgetPerMinute: f.byteBudget,
    byteBudgetBurst: f.byteBudgetBurst,
    maxOutputChars: f.maxOutputChars,
    maxTextChars: f.maxTextChars,
    reconnectsPerMinute: f.reconnectLimit,
    reconnectBurst: f.reconnectBurst,
    leaseBucket: f.leaseBucket,
    leaseTtlMs: f.leaseTtl,
    drainDeadlineMs: f.drainDeadline,
    reconnectAfterMs: f.reconnectAfter,
    revokedBucket: f.revokedBucket,
    duplicateRetryAfterMs: f.duplicateRetryAfter,
    metricsListen: f.metricsListen,
    connectionLimits: {
      handshakeTimeoutMs: f.handshakeTimeout,
      firstStreamTimeoutMs: f.firstStreamTimeout,
      idleSessionTimeoutMs: f.idleSessionTimeout,
      unauthenticatedGraceMs: f.unauthenticatedGrace,
      maxConnections: f.maxConnections,
      maxConnectionsPerAddress: f.maxConnectionsPerAddress,
      maxConcurrentStreams: f.maxConcurrentStreams,
      maxStreamResets: f.maxStreamResets,
      maxHeaderBytes: f.maxHeaderBytes,
    },
  };
  try {
    parseGatewayConfig(input);
  } catch (err) {
    throw new CliError((err as Error).message);
  }
  return input;
}

function ms(flag: string, envName: string, what: string, def: number): Option {
  return intOption(flag, env(envName), what, def, "ms");
}

function num(flag: string, envName: string, what: string, def: number): Option {
  return intOption(flag, env(envName), what, def);
}

function defaultId(): string {
  const h = hostname()
    .replace(/[^A-Za-z0-9_-]/g, "-")
    .slice(0, 60);
  return `gw-${h || "local"}`.slice(0, 64);
}
