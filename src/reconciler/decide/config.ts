/**
 * The reconciler's tunables. Plain data, validated by a zod schema so that a
 * config file (what-if, the runner) names the field it got wrong; a partial
 * config takes the defaults for what it leaves out.
 */
import { z } from "zod";
import { AUTOSCALE_METRICS, type AutoscaleSpec, LOAD_HISTORY_MS } from "../../projections/index.js";

export interface ReconcilerConfig {
  /** Placement scoring: "binpack" fills busy nodes first, "spread" prefers empty ones. */
  policy: "binpack" | "spread";
  /** A node without a session becomes suspect (no new work) after this long. */
  suspectAfterMs: number;
  /** ...and lost (its shards count as gone, replicas re-placed) after this long. */
  lostAfterMs: number;
  /** A command's first deadline for a result. */
  commandTimeoutMs: number;
  /**
   * A started shard must report STARTING within this long, or its start is
   * sent again (same command id, doubling wait) — unless the profile says otherwise.
   */
  startTimeoutMs: number;
  /** Sends of a start without STARTING before the placement fails (profile may override). */
  startAttempts: number;
  /** A shard STARTING for longer than this is stopped and its replica failed (profile may override). */
  readyTimeoutMs: number;
  /** Re-issue backoff: retryBase·2^(attempt-1), capped at retryMax. */
  retryBaseMs: number;
  retryMaxMs: number;
  /** Failures of a model on a node before the pair is put on cooldown (1: every failure). */
  cooldownFailures: number;
  cooldownMs: number;
  /** Crash-loop backoff: min(crashBackoffMax, crashBackoffBase·2^restarts). */
  crashBackoffBaseMs: number;
  crashBackoffMaxMs: number;
  /** A draining shard is stopped when it has not exited this long after the drain began. */
  drainDeadlineMs: number;
  /** Decisions in one pass; the rest waits for the next pass. */
  maxDecisionsPerPass: number;
  /**
   * Encoded bytes of one pass's decisions and commands; the rest waits for
   * the next pass. A pass is one log message, and the NATS server refuses a
   * message over its max_payload (1 MiB by default): the default leaves a
   * quarter of that for the event's envelope, the message headers and the
   * routing table restated outside the limit. The runner lowers it to what
   * its server carries (fitPassBytes).
   */
  maxPassBytes: number;
  /**
   * Per model, autoscale fields that replace the catalog's (the others keep
   * the catalog's values, or the defaults for a model without autoscale,
   * which then needs min, max, metric and target): what-if replays history
   * with another setting through it (`llmgw what-if --autoscale`).
   */
  autoscale: Readonly<Record<string, Partial<AutoscaleSpec>>>;
}

export const DEFAULT_RECONCILER_CONFIG: ReconcilerConfig = Object.freeze({
  policy: "binpack",
  suspectAfterMs: 30_000,
  lostAfterMs: 120_000,
  commandTimeoutMs: 60_000,
  startTimeoutMs: 60_000,
  startAttempts: 3,
  // Large models load for minutes.
  readyTimeoutMs: 20 * 60_000,
  retryBaseMs: 5_000,
  retryMaxMs: 120_000,
  cooldownFailures: 1,
  cooldownMs: 10 * 60_000,
  crashBackoffBaseMs: 10_000,
  crashBackoffMaxMs: 5 * 60_000,
  drainDeadlineMs: 5 * 60_000,
  maxDecisionsPerPass: 1_000,
  maxPassBytes: 768 * 1024,
  autoscale: Object.freeze({}),
});

/** Room a pass event needs besides its decisions and commands: its envelope and the message headers. */
export const PASS_HEADROOM_BYTES = 8 * 1024;
/** The smallest maxPassBytes taken: a config below it could not carry a usual unit. */
export const MIN_PASS_BYTES = 4 * 1024;

/** A config fitted to a server's max_payload: `lowered` names the limit it had and has, or is null. */
export interface PassBytesFit<C> {
  config: C;
  lowered: { from: number; to: number } | null;
}

/**
 * The config with maxPassBytes lowered, when needed, so that a pass fits in
 * a message of `maxPayload` bytes (the NATS server's max_payload; unknown =
 * as configured) with PASS_HEADROOM_BYTES to spare. The runner applies it
 * to the config it hands decide, and `check-log --redecide` to the config
 * it decides again with, so that both decide with the same limit.
 */
export function fitPassBytes(
  config: ReconcilerConfig,
  maxPayload: number | undefined,
): PassBytesFit<ReconcilerConfig> {
  if (maxPayload === undefined) return { config, lowered: null };
  const fits = Math.max(1, maxPayload - PASS_HEADROOM_BYTES);
  if (config.maxPassBytes <= fits) return { config, lowered: null };
  return { config: { ...config, maxPassBytes: fits }, lowered: { from: config.maxPassBytes, to: fits } };
}

const ms = () => z.number().int().nonnegative();
const positiveMs = () => z.number().int().positive();

/** An autoscale setting in a config (ms, like every other field here); the catalog's is written with durations. */
export const autoscaleSpecSchema = z
  .strictObject({
    min: z
      .number()
      .int()
      .min(1, "must be at least 1 (with no ready replica there is no load to read)")
      .optional(),
    max: z.number().int().min(1).max(10_000).optional(),
    metric: z.enum(AUTOSCALE_METRICS as [string, ...string[]]).optional(),
    target: z.number().positive().optional(),
    tolerance: z.number().min(0).max(1).optional(),
    upCooldownMs: ms().optional(),
    downCooldownMs: ms().optional(),
    stabilizationMs: ms()
      .max(LOAD_HISTORY_MS, `must be at most ${LOAD_HISTORY_MS} (the load history the fold keeps)`)
      .optional(),
  })
  .check((ctx) => {
    const a = ctx.value;
    if (a.max !== undefined && a.min !== undefined && a.max < a.min)
      ctx.issues.push({
        code: "custom",
        input: a.max,
        path: ["max"],
        message: `must be at least min (${a.min})`,
      });
    if (a.metric === "kv_cache_use" && a.target !== undefined && a.target > 1)
      ctx.issues.push({
        code: "custom",
        input: a.target,
        path: ["target"],
        message: "kv_cache_use is a share from 0 to 1: the target must be at most 1",
      });
  });

const fields = z.strictObject({
  policy: z.enum(["binpack", "spread"]),
  suspectAfterMs: positiveMs(),
  lostAfterMs: positiveMs(),
  commandTimeoutMs: positiveMs(),
  startTimeoutMs: positiveMs(),
  startAttempts: z.number().int().positive(),
  readyTimeoutMs: positiveMs(),
  retryBaseMs: positiveMs(),
  retryMaxMs: positiveMs(),
  cooldownFailures: z.number().int().positive(),
  cooldownMs: ms(),
  crashBackoffBaseMs: ms(),
  crashBackoffMaxMs: ms(),
  drainDeadlineMs: positiveMs(),
  maxDecisionsPerPass: z.number().int().positive(),
  maxPassBytes: z
    .number()
    .int()
    .min(MIN_PASS_BYTES, `must be at least ${MIN_PASS_BYTES} (one pass carries one start)`),
  autoscale: z.record(z.string(), autoscaleSpecSchema),
});

/** Validates a (partial) config and merges it over the defaults. Unknown fields are errors: a typo must not pass silently. */
export const reconcilerConfigSchema: z.ZodType<ReconcilerConfig> = fields
  .partial()
  .transform((partial): ReconcilerConfig => {
    const out = { ...DEFAULT_RECONCILER_CONFIG };
    for (const [k, v] of Object.entries(partial)) if (v !== undefined) Object.assign(out, { [k]: v });
    return out;
  })
  .check((ctx) => {
    const c = ctx.value;
    const order = (lo: keyof ReconcilerConfig, hi: keyof ReconcilerConfig) => {
      if ((c[lo] as number) > (c[hi] as number))
        ctx.issues.push({
          code: "custom",
          input: c[hi],
          path: [hi],
          message: `${hi} (${c[hi]}) must be at least ${lo} (${c[lo]})`,
        });
    };
    order("suspectAfterMs", "lostAfterMs");
    order("retryBaseMs", "retryMaxMs");
    order("crashBackoffBaseMs", "crashBackoffMaxMs");
  });

/** One line per problem, each naming its field, for people. */
export function describeConfigError(err: z.ZodError): string {
  return err.issues.map((i) => `${i.path.length > 0 ? i.path.join(".") : "config"}: ${i.message}`).join("; ");
}
