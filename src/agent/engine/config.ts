/** The agent config's `engines` section: how each engine is started, probed, drained and stopped. */
import { z } from "zod";
import { deniedEnv, ENGINE_LIMITS } from "../../engine-policy/index.js";
import { PLACEHOLDERS, unknownPlaceholders } from "./template.js";

const template = z
  .string()
  .min(1)
  .max(4096)
  .superRefine((t, ctx) => {
    const bad = unknownPlaceholders(t);
    if (bad.length > 0)
      ctx.addIssue({
        code: "custom",
        message: `unknown placeholder ${bad.map((b) => `{${b}}`).join(", ")}; known: ${PLACEHOLDERS.map((p) => `{${p}}`).join(" ")}`,
      });
  });

/** One metric name, or several tried in order (the first the engine exports counts). */
const metricNames = z
  .union([z.string().min(1).max(256), z.array(z.string().min(1).max(256)).min(1).max(8)])
  .transform((n) => (typeof n === "string" ? [n] : n));

/**
 * Where the engine says how busy it is (Prometheus text format), and which
 * of its metrics say it. The defaults are vLLM's.
 */
const engineMetricsSchema = z.strictObject({
  http: template.default("http://127.0.0.1:{port}/metrics"),
  /** Requests waiting in the engine's queue. */
  queueDepth: metricNames.default(["vllm:num_requests_waiting"]),
  /** Share of the KV cache in use, 0 to 1 (vLLM renamed it: both are read). */
  kvCacheUse: metricNames.default(["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"]),
  /** Requests being served now. */
  running: metricNames.default(["vllm:num_requests_running"]),
  /** How often a RUNNING engine's metrics are read (a draining one's more often). */
  intervalMs: z.number().int().min(100).max(60_000).default(2000),
  timeoutMs: z.number().int().min(50).max(60_000).default(1000),
});

/**
 * The default ready probe's period while an engine starts. Every period
 * that passes between an engine becoming ready and its probe is a replica
 * not serving (half a period on average), while a probe of an engine still
 * loading costs a refused connection to a local port, microseconds: so a
 * starting engine is probed four times a second, far more often than a
 * running one's liveness (every 5 s).
 */
export const READY_INTERVAL_MS = 250;

export const engineSchema = z.strictObject({
  /** The argv template; the profile's engine_args are appended. */
  command: z.array(template).min(1, "needs at least the program"),
  env: z
    .record(
      z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name"),
      z.string().max(4096),
    )
    .default({}),
  /**
   * The environment names the catalog may set for this engine (a trailing
   * `*` matches any rest: `VLLM_*`). Unset: any name outside the deny list.
   * The deny list applies either way.
   */
  allowedEnv: z
    .array(
      z
        .string()
        .regex(/^[A-Za-z_][A-Za-z0-9_]*\*?$/, "must be a variable name, or a prefix ending in '*'")
        .superRefine((name, ctx) => {
          const denied = name.endsWith("*") ? undefined : deniedEnv(name);
          if (denied)
            ctx.addIssue({
              code: "custom",
              message: `${name} is on the deny list (${denied.pattern}) and can never come from the catalog; set it in this engine's env instead`,
            });
        }),
    )
    .max(256)
    .optional(),
  /**
   * Every argument the catalog appends must start with one of these (so a
   * flag's value is written `--flag=value`). Unset: arguments are free.
   */
  allowedArgPrefixes: z.array(z.string().min(1).max(ENGINE_LIMITS.maxArgChars)).max(256).optional(),
  ready: z.strictObject({
    /** Polled until it answers 200: the engine is RUNNING from then on. */
    http: template,
    /** How often a STARTING engine is probed (see READY_INTERVAL_MS); a RUNNING one's is `liveness.intervalMs`. */
    intervalMs: z.number().int().min(50).max(60_000).default(READY_INTERVAL_MS),
    timeoutMs: z.number().int().min(50).max(60_000).default(2000),
    /**
     * Which shards of a multi-node replica are probed. "first": only rank 0,
     * the others are RUNNING once started — for engines whose other ranks
     * serve no HTTP (vLLM's `--headless` workers); rank 0 is healthy only
     * once every rank joined it.
     */
    ranks: z.enum(["all", "first"]).default("all"),
  }),
  /**
   * Once RUNNING, the ready URL is probed again every `intervalMs`: after
   * `failureThreshold` failures in a row (no 200 within `timeoutMs`) the
   * shard is unhealthy, out of the routing table at once, and recovered by
   * `restartPolicy`. A probe that succeeds before the threshold resets the count.
   */
  liveness: z
    .strictObject({
      intervalMs: z.number().int().min(50).max(600_000).default(5000),
      timeoutMs: z.number().int().min(50).max(60_000).default(2000),
      failureThreshold: z.number().int().min(1).max(100).default(3),
    })
    .prefault({}),
  /**
   * What an unhealthy engine gets. `replace` (default): it is reported FAILED
   * and stopped, and the control plane places the replica again (backoff and
   * cooldown as for a crash). `restart-in-place`: the same command on the
   * same GPUs, up to `maxRestarts` times per agent process, then as `replace`.
   */
  restartPolicy: z.enum(["replace", "restart-in-place"]).default("replace"),
  maxRestarts: z.number().int().min(0).max(100).default(3),
  /**
   * A drain: `http` (optional) is asked first, so the engine stops taking
   * requests and finishes what it has. The engine is stopped once its
   * metrics show no request running or waiting and the shard has been out
   * of the routing table for `idleGraceMs` (so routers have moved on), or at
   * the drain's deadline at the latest.
   */
  drain: z
    .strictObject({
      http: template.optional(),
      method: z.enum(["POST", "PUT"]).default("POST"),
      idleGraceMs: z.number().int().min(0).max(600_000).default(2000),
    })
    .prefault({}),
  metrics: engineMetricsSchema.prefault({}),
  /** SIGTERM to the engine's process group, SIGKILL this long after. */
  stopGraceSeconds: z.number().min(0).max(3600).default(30),
  portRange: z
    .tuple([z.number().int().min(1024).max(65535), z.number().int().min(1024).max(65535)])
    .default([8000, 8999]),
});

export const enginesSchema = z.record(
  z.string().regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, "engine names are 1 to 63 of a-z, 0-9, '_' and '-'"),
  engineSchema,
);

export type EngineConfig = z.output<typeof engineSchema>;
export type EngineMetricsConfig = z.output<typeof engineMetricsSchema>;
export type EnginesConfig = z.output<typeof enginesSchema>;
