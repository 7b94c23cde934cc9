/**
 * The catalog file (YAML or JSON) as operators write it. Field names follow
 * the proto `Catalog` in camelCase, except GPU memory, which is a size with
 * a unit (`memoryPerGpu: "72GiB"`, see memory.ts). Objects are strict: a
 * misspelt key is an error, not a silently ignored default.
 */
import { z } from "zod";
import { ENGINE_LIMITS, envNameProblem, totalChars } from "../../engine-policy/index.js";
import { isReservedKey } from "../../ids/index.js";
import {
  AUTOSCALE_DEFAULTS,
  AUTOSCALE_METRICS,
  DEFAULT_ENGINE,
  invalidMinAvailableReason,
  LOAD_HISTORY_MS,
} from "../../projections/index.js";
import { parseDuration } from "./duration.js";
import { parseMemory } from "./memory.js";

/**
 * Model and profile names. They reach agents (which may name files and
 * folders after them) and replica ids (which appear in URLs), so they start
 * with a letter or digit: never `.`, `..` or a hidden name.
 */
export const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const LABEL_KEY = /^[A-Za-z0-9._/-]{1,128}$/;
/**
 * Engine names: a key of the agent's configuration (`engines.<name>`), which
 * may also name files after it, so lower case and never a hidden name.
 */
export const ENGINE_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;

const name = z
  .string()
  .regex(
    NAME_PATTERN,
    "must be 1 to 64 characters: letters, digits, '.', '_' or '-', starting with a letter or digit",
  )
  .refine((n) => !isReservedKey(n), "is a reserved name");

const positiveInt = (max: number) =>
  z.number().int("must be a whole number").min(1, "must be at least 1").max(max, `must be at most ${max}`);

const memory = z.string().transform((text, ctx) => {
  const r = parseMemory(text);
  if ("error" in r) {
    ctx.addIssue({ code: "custom", message: r.error });
    return z.NEVER;
  }
  return r.mb;
});

const duration = z
  // A bare number is the mistake this guards against: say what to write instead.
  .string({ error: 'expected a duration with a unit, like "90s", "20m" or "1h30m"' })
  .transform((text, ctx) => {
    const r = parseDuration(text);
    if ("error" in r) {
      ctx.addIssue({ code: "custom", message: r.error });
      return z.NEVER;
    }
    return r.ms;
  });

export const profileSchema = z
  .strictObject({
    name,
    /** Shards per replica; more than one need a fabricKind. */
    shards: positiveInt(64).default(1),
    gpusPerShard: positiveInt(64),
    memoryPerGpu: memory,
    gpuProduct: z.string().max(128).default(""),
    fabricKind: z
      .string()
      .regex(/^[A-Za-z0-9._-]{0,64}$/, "must be up to 64 letters, digits, '.', '_' or '-'")
      .default(""),
    nodeLabels: z
      .record(
        z.string().regex(LABEL_KEY, "label keys are 1 to 128 of letters, digits, '.', '_', '/', '-'"),
        z.string().max(256),
      )
      .default({}),
    /** The agent's engine (`engines.<name>` of its configuration) the shards run with. */
    engine: z
      .string()
      .regex(
        ENGINE_NAME_PATTERN,
        "must be 1 to 63 characters: lower-case letters, digits, '_' or '-', starting with a letter or digit",
      )
      .default(DEFAULT_ENGINE),
    /** Appended to the engine's command; the agent may allow only some (docs/agent.md). */
    engineArgs: z
      .array(
        z
          .string()
          .max(ENGINE_LIMITS.maxArgChars, `must be at most ${ENGINE_LIMITS.maxArgChars} characters`)
          .refine((a) => !a.includes("\u0000"), "must not contain a NUL character"),
      )
      .max(ENGINE_LIMITS.maxArgs, `must be at most ${ENGINE_LIMITS.maxArgs} arguments`)
      .default([]),
    /** Names on the deny list (src/engine-policy) would let the catalog run code on the nodes: refused. */
    engineEnv: z
      .record(
        z.string().superRefine((name, ctx) => {
          const why = envNameProblem(name);
          if (why) ctx.addIssue({ code: "custom", message: why });
        }),
        z
          .string()
          .max(ENGINE_LIMITS.maxEnvValueChars, `must be at most ${ENGINE_LIMITS.maxEnvValueChars} characters`)
          .refine((v) => !v.includes("\u0000"), "must not contain a NUL character"),
      )
      .refine(
        (env) => Object.keys(env).length <= ENGINE_LIMITS.maxEnv,
        `must be at most ${ENGINE_LIMITS.maxEnv} variables`,
      )
      .default({}),
    /** How long a started shard has to report STARTING before its start is sent again; default: the reconciler's (60s). */
    startTimeout: duration.optional(),
    /** How many sends of a start without STARTING before the placement fails; default: the reconciler's (3). */
    startAttempts: positiveInt(100).optional(),
    /** How long a shard may load (STARTING) before it is stopped and its replica failed; default: the reconciler's (20m). */
    readyTimeout: duration.optional(),
  })
  .superRefine((p, ctx) => {
    const total = totalChars(p.engineArgs, p.engineEnv);
    if (total > ENGINE_LIMITS.maxTotalChars)
      ctx.addIssue({
        code: "custom",
        path: ["engineArgs"],
        message: `engineArgs and engineEnv are ${total} characters together, more than ${ENGINE_LIMITS.maxTotalChars}`,
      });
  });

/** Replica counts: 0 keeps the model known and serves nothing. */
export const replicaCount = z
  .number()
  .int("must be a whole number")
  .min(0, "must not be negative")
  .max(10_000, "must be at most 10000");

/**
 * The disruption budget: a count of replicas (2 or "2") or a percentage of
 * the desired replicas ("75%", rounded up), kept as text.
 */
const minAvailable = z
  .union([z.number().int("must be a whole number").min(0, "must not be negative"), z.string()], {
    error: 'must be a whole number of replicas (e.g. 2) or a percentage of the desired replicas (e.g. "75%")',
  })
  .transform((v, ctx) => {
    const text = String(v);
    const why = invalidMinAvailableReason(text);
    if (why !== undefined) {
      ctx.addIssue({ code: "custom", message: why });
      return z.NEVER;
    }
    return text;
  });

/** How a spec change rolls the model's replicas (defaults: maxSurge 1, maxUnavailable 0, progressDeadline 10m). */
export const rolloutSchema = z
  .strictObject({
    /** Replicas beyond `replicas` while rolling. */
    maxSurge: replicaCount.optional(),
    /** How many fewer than `replicas` may be ready while rolling. */
    maxUnavailable: replicaCount.optional(),
    /** A new replica not ready this long after its creation stalls the rollout. */
    progressDeadline: duration.optional(),
  })
  .superRefine((r, ctx) => {
    if ((r.maxSurge ?? 1) === 0 && (r.maxUnavailable ?? 0) === 0)
      ctx.addIssue({
        code: "custom",
        path: ["maxSurge"],
        message: "maxSurge and maxUnavailable cannot both be 0: the rollout could never replace a replica",
      });
  });

const cooldown = duration.refine((ms) => ms >= 1000, "must be at least 1s");

/**
 * Replicas follow load: the metric averaged over the ready replicas is held
 * near `target` (docs/autoscaling.md). `replicas` is where the count starts.
 */
export const autoscaleSchema = z
  .strictObject({
    /** At least 1: with no ready replica there is no load to read. */
    min: positiveInt(10_000),
    max: positiveInt(10_000),
    metric: z.enum(AUTOSCALE_METRICS as [string, ...string[]], {
      error: `must be one of ${AUTOSCALE_METRICS.join(", ")}`,
    }),
    /** queue_depth: requests waiting per ready replica; kv_cache_use: a share from 0 to 1. */
    target: z.number().positive("must be above 0"),
    /** No decision within target·(1 ± tolerance); default 0.1. */
    tolerance: z.number().min(0.01, "must be at least 0.01").max(1, "must be at most 1").optional(),
    /** After a scale decision, before a scale-up; default 30s. */
    scaleUpCooldown: cooldown.optional(),
    /** After a scale decision, before a scale-down; default 2m; never shorter than scaleUpCooldown. */
    scaleDownCooldown: cooldown.optional(),
    /** How long the load must stay beyond the band before a decision; default 15s. */
    stabilization: cooldown
      .refine((ms) => ms <= LOAD_HISTORY_MS, "must be at most 2m (the load history the control plane keeps)")
      .optional(),
  })
  .check((ctx) => {
    const a = ctx.value;
    const issue = (path: string, input: unknown, message: string) =>
      ctx.issues.push({ code: "custom", input, path: [path], message });
    if (a.max < a.min) issue("max", a.max, `must be at least min (${a.min})`);
    if (a.metric === "kv_cache_use" && a.target > 1)
      issue("target", a.target, "kv_cache_use is a share from 0 to 1: the target must be at most 1");
    const up = a.scaleUpCooldown ?? AUTOSCALE_DEFAULTS.upCooldownMs;
    const down = a.scaleDownCooldown ?? AUTOSCALE_DEFAULTS.downCooldownMs;
    if (down < up)
      issue(
        "scaleDownCooldown",
        down,
        `must be at least scaleUpCooldown (${up} ms): scaling down is the slower direction`,
      );
  });

export const modelSchema = z.strictObject({
  name,
  /** 0 keeps the model known and serves nothing; with autoscale, the count it starts from. */
  replicas: replicaCount,
  /** In order of preference. */
  profiles: z.array(profileSchema).max(32).default([]),
  /** Ready replicas to keep while nodes drain, GPUs fault and rollouts replace replicas; default: none. */
  minAvailable: minAvailable.optional(),
  rollout: rolloutSchema.optional(),
  autoscale: autoscaleSchema.optional(),
});

export const catalogFileSchema = z.strictObject({
  // Required even when empty: an empty file applied by mistake must not remove every model.
  models: z.array(modelSchema).max(1000),
});

export type CatalogFile = z.output<typeof catalogFileSchema>;
export type CatalogModel = z.output<typeof modelSchema>;
export type CatalogProfile = z.output<typeof profileSchema>;
/** What operators write (memory as text, defaults not filled in). */
export type CatalogFileInput = z.input<typeof catalogFileSchema>;
