import { z } from "zod";
import { Http2LimitsSchema } from "../connection-guard/index.js";
import { invalidIdReason } from "../ids/index.js";
import { DEFAULT_NATS_URL, DEFAULT_PREFIX, DEFAULT_STREAM } from "../log/index.js";

import { isLoopback, type ListenAddress, parseListen } from "../metrics-endpoint/index.js";
import { DEFAULT_REVOKED_BUCKET } from "./revocation-keys.js";
import { type CoreConfig, MIN_TEXT_CAP } from "./session-core/index.js";

export { isLoopback, type ListenAddress, parseListen };

const pem = z.union([z.string().min(1), z.instanceof(Buffer)]);
const ms = (def: number) => z.number().int().positive().default(def);

/**
 * Publishes the gateway keeps in flight to JetStream by default. The acks of
 * a deeper window come back in fewer, larger reads: 1,024 rather than 256
 * saves the gateway 1.5–2.5 µs of CPU per event under the ingest load
 * (alternating runs outside the bench, docs/performance-history.md), for about
 * 1 MB of events held at most.
 */
export const DEFAULT_PUBLISH_WINDOW = 1024;

/**
 * Everything a gateway needs. TLS material is given as PEM contents (the
 * command reads the files), so tests and embedders need no files.
 */
export const GatewayConfigSchema = z
  .object({
    /** The gateway's id: a subject token, unique among running gateways. */
    id: z.string().superRefine((id, ctx) => {
      const why = invalidIdReason(id, "gateway id");
      if (why) ctx.addIssue({ code: "custom", message: why });
    }),
    /** host:port for agent streams; port 0 picks a free port. */
    listen: z.string().default("127.0.0.1:7443"),
    tls: z.object({ cert: pem, key: pem, clientCa: pem }).optional(),
    /**
     * TLS from files instead (paths), read again when they change: new
     * handshakes use the new certificate, key and client CA; open streams stay.
     */
    tlsFiles: z
      .object({ cert: z.string().min(1), key: z.string().min(1), clientCa: z.string().min(1) })
      .optional(),
    /** How often the TLS files are looked at. */
    tlsPollMs: ms(1_000),
    /** KV bucket of revoked CNs and certificate serials, watched live. */
    revokedBucket: z
      .string()
      .regex(/^[A-Za-z0-9_-]+$/)
      .default(DEFAULT_REVOKED_BUCKET),
    /**
     * Told to a second agent presenting the identity of a live session:
     * wait this long before connecting again.
     */
    duplicateRetryAfterMs: ms(5_000),
    /** h2c on loopback, identity taken from the message. Local development only. */
    insecureDev: z.boolean().default(false),
    nats: z.string().default(DEFAULT_NATS_URL),
    stream: z.string().default(DEFAULT_STREAM),
    prefix: z.string().default(DEFAULT_PREFIX),
    /** Replicas of the stream and the lease bucket when this gateway creates them. */
    streamReplicas: z.int().min(1).max(5).default(1),
    /** A stream with no message for this long is closed as silent. */
    heartbeatTimeoutMs: ms(15_000),
    /** A stream must register within this long after it opens. */
    registrationTimeoutMs: ms(10_000),
    /** Largest agent message accepted, bytes. */
    readMaxBytes: z
      .number()
      .int()
      .positive()
      .default(1024 * 1024),
    /**
     * Agent streams in binary gRPC or Connect, uncompressed and without a
     * deadline, are framed directly (src/gateway/agent-call) instead of by
     * Connect's handler, which serves everything else either way.
     */
    directStreams: z.boolean().default(true),
    /** Messages waiting for one agent; past this the agent is too far behind and is disconnected. */
    sendQueueMax: z.number().int().positive().default(256),
    /** Publishes in flight to JetStream, across all streams (see DEFAULT_PUBLISH_WINDOW). */
    publishWindow: z.number().int().positive().default(DEFAULT_PUBLISH_WINDOW),
    /** Events of one stream queued or in flight (published in order); the stream is not read past this. */
    streamWindow: z.number().int().positive().default(32),
    /**
     * An agent with cumulative acks gets one ack for this many stored
     * messages while more of its messages are on their way to the log
     * (session-core/acks.ts).
     */
    ackEvery: z.number().int().positive().default(16),
    /** ... or once the oldest of them waited this long, whichever comes first. */
    ackDelayMs: ms(20),
    /** Wait this long for one publish ack before retrying it. */
    publishTimeoutMs: ms(5_000),
    /** The log unreachable for this long closes streams with Unavailable. */
    logUnavailableLimitMs: ms(30_000),
    /** A heartbeat appends a usage event when a GPU's memory use moved by more than this, MiB. */
    usageThresholdMb: z.number().int().nonnegative().default(1024),
    /**
     * At most one usage event per session per this long: what heartbeats say
     * within it is written once, at its end, the latest values winning. The
     * default is the heartbeat of the agent and the simulator.
     */
    usageIntervalMs: ms(3_000),
    /**
     * Events one session may write (usage, shard status, command results,
     * re-registrations): this many a minute, after a burst of
     * `eventBudgetBurst`. Past it the session is closed (EVENT_BUDGET,
     * ResourceExhausted).
     */
    eventBudgetPerMinute: z.number().int().positive().default(600),
    eventBudgetBurst: z.number().int().positive().default(600),
    /**
     * Bytes one session may write (the same events, by their size): this
     * many a minute, after a burst of `byteBudgetBurst`. Past it the session
     * is closed (EVENT_BUDGET, ResourceExhausted).
     */
    byteBudgetPerMinute: z
      .number()
      .int()
      .positive()
      .default(1024 * 1024),
    byteBudgetBurst: z
      .number()
      .int()
      .positive()
      .default(2 * 1024 * 1024),
    /**
     * Characters of a shard's last output, and of every other free-text field
     * an agent sends (errors, labels, GPU names, problem texts): longer text
     * is cut and ends with a marker, never refused.
     */
    maxOutputChars: z.number().int().min(MIN_TEXT_CAP).max(1_000_000).default(4096),
    maxTextChars: z.number().int().min(MIN_TEXT_CAP).max(1_000_000).default(1024),
    /**
     * Registrations of one node on this gateway: this many a minute, after a
     * burst of `reconnectBurst`. Past it a registration is refused
     * (ResourceExhausted) and the agent told when to come back (Reconnect).
     */
    reconnectsPerMinute: z.number().int().positive().default(60),
    reconnectBurst: z.number().int().positive().default(30),
    /** KV bucket of gateway leases. */
    leaseBucket: z
      .string()
      .regex(/^[A-Za-z0-9_-]+$/)
      .default("llmgw-gateways"),
    leaseTtlMs: ms(15_000),
    /** SIGTERM: every stream closed and the process gone within this long. */
    drainDeadlineMs: ms(10_000),
    /** Told to agents in Reconnect: wait this long before connecting again. */
    reconnectAfterMs: z.number().int().nonnegative().default(1_000),
    /** Connection caps, deadlines and HTTP/2 abuse limits of the agent listener (docs/gateway.md). */
    connectionLimits: Http2LimitsSchema.prefault({}),
    /** host:port of the Prometheus endpoint; none when absent. */
    metricsListen: z.string().optional(),
    version: z.string().default("0.1.0"),
  })
  .superRefine((c, ctx) => {
    let listen: ListenAddress | undefined;
    try {
      listen = parseListen(c.listen);
    } catch (err) {
      ctx.addIssue({ code: "custom", path: ["listen"], message: (err as Error).message });
    }
    if (c.metricsListen !== undefined) {
      try {
        parseListen(c.metricsListen);
      } catch (err) {
        ctx.addIssue({ code: "custom", path: ["metricsListen"], message: (err as Error).message });
      }
    }
    if (c.tls && c.tlsFiles) {
      ctx.addIssue({
        code: "custom",
        path: ["tlsFiles"],
        message: "give TLS material either as contents (tls) or as files (tlsFiles), not both",
      });
    }
    if (c.insecureDev) {
      if (c.tls || c.tlsFiles) {
        ctx.addIssue({
          code: "custom",
          path: ["insecureDev"],
          message: "insecure-dev mode takes no TLS material",
        });
      }
      if (listen && !isLoopback(listen.host)) {
        ctx.addIssue({
          code: "custom",
          path: ["listen"],
          message: `insecure-dev mode serves plain h2c and trusts the node id in the message, so it listens on loopback only; ${c.listen} is not a loopback address`,
        });
      }
    } else if (!c.tls && !c.tlsFiles) {
      ctx.addIssue({
        code: "custom",
        path: ["tls"],
        message:
          "a TLS certificate, key and client CA are required (or explicit insecure-dev mode for local use)",
      });
    }
    if (c.leaseTtlMs < 1_000) {
      ctx.addIssue({ code: "custom", path: ["leaseTtlMs"], message: "lease TTL must be at least 1 s" });
    }
  });

export type GatewayConfigInput = z.input<typeof GatewayConfigSchema>;
export type GatewayConfig = z.output<typeof GatewayConfigSchema>;

/** Validates a configuration, naming every problem in one error. */
export function parseGatewayConfig(input: GatewayConfigInput): GatewayConfig {
  const r = GatewayConfigSchema.safeParse(input);
  if (r.success) return r.data;
  const problems = r.error.issues.map(
    (i) => `${i.path.length > 0 ? `${i.path.join(".")}: ` : ""}${i.message}`,
  );
  throw new RangeError(`invalid gateway configuration: ${problems.join("; ")}`);
}

/** What the session core knows of the gateway (fixed for the life of a stream). */
export function coreConfigOf(cfg: GatewayConfig): CoreConfig {
  return {
    gatewayId: cfg.id,
    insecureDev: cfg.insecureDev,
    usageThresholdMb: cfg.usageThresholdMb,
    registrationTimeoutMs: cfg.registrationTimeoutMs,
    heartbeatTimeoutMs: cfg.heartbeatTimeoutMs,
    usageIntervalMs: cfg.usageIntervalMs,
    eventBudget: { perMinute: cfg.eventBudgetPerMinute, burst: cfg.eventBudgetBurst },
    byteBudget: { perMinute: cfg.byteBudgetPerMinute, burst: cfg.byteBudgetBurst },
    textCaps: { outputChars: cfg.maxOutputChars, textChars: cfg.maxTextChars },
    ackEvery: cfg.ackEvery,
    ackDelayMs: cfg.ackDelayMs,
  };
}
