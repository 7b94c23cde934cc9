/**
 * The catalog file and the log's `Catalog` message, both ways: apply turns
 * the file into the event; GET turns the catalog in force back into the
 * file's shape, so `GET`, edit, `PUT` round-trips.
 */
import { create } from "@bufbuild/protobuf";
import { type Catalog, CatalogSchema } from "../../gen/llmgw/v1/events_pb.js";
import { DEFAULT_ROLLOUT_POLICY, type ModelSpec, type RolloutPolicySpec } from "../../projections/index.js";
import { formatDuration } from "./duration.js";
import { formatMemory } from "./memory.js";
import type { CatalogFile, CatalogFileInput } from "./schema.js";

/** The profile fields the file and the log name and type alike, copied. */
function sameInBoth(p: {
  name: string;
  shards: number;
  gpusPerShard: number;
  gpuProduct: string;
  fabricKind: string;
  engine: string;
  nodeLabels: Record<string, string>;
  engineArgs: readonly string[];
  engineEnv: Record<string, string>;
}) {
  return {
    name: p.name,
    shards: p.shards,
    gpusPerShard: p.gpusPerShard,
    gpuProduct: p.gpuProduct,
    fabricKind: p.fabricKind,
    engine: p.engine,
    nodeLabels: { ...p.nodeLabels },
    engineArgs: [...p.engineArgs],
    engineEnv: { ...p.engineEnv },
  };
}

/** The autoscale fields the file and the log name and type alike, copied (the durations differ in unit). */
function autoscaleInBoth<M extends string>(a: { min: number; max: number; metric: M; target: number }) {
  return { min: a.min, max: a.max, metric: a.metric, target: a.target };
}

export function toProtoCatalog(file: CatalogFile): Catalog {
  return create(CatalogSchema, {
    models: file.models.map((m) => ({
      name: m.name,
      replicas: m.replicas,
      minAvailable: m.minAvailable ?? "",
      ...(m.rollout
        ? {
            rollout: {
              ...(m.rollout.maxSurge === undefined ? {} : { maxSurge: m.rollout.maxSurge }),
              ...(m.rollout.maxUnavailable === undefined ? {} : { maxUnavailable: m.rollout.maxUnavailable }),
              progressDeadlineMs: m.rollout.progressDeadline ?? 0,
            },
          }
        : {}),
      profiles: m.profiles.map((p) => ({
        ...sameInBoth(p),
        memoryPerGpuMb: BigInt(p.memoryPerGpu),
        startTimeoutMs: p.startTimeout ?? 0,
        startAttempts: p.startAttempts ?? 0,
        readyTimeoutMs: p.readyTimeout ?? 0,
      })),
      ...(m.autoscale
        ? {
            autoscale: {
              ...autoscaleInBoth(m.autoscale),
              tolerance: m.autoscale.tolerance ?? 0,
              scaleUpCooldownMs: m.autoscale.scaleUpCooldown ?? 0,
              scaleDownCooldownMs: m.autoscale.scaleDownCooldown ?? 0,
              stabilizationMs: m.autoscale.stabilization ?? 0,
            },
          }
        : {}),
    })),
  });
}

/** The fields of a rollout policy that differ from the defaults; none: no `rollout` key. */
function rolloutFileFrom(r: RolloutPolicySpec): {
  rollout?: NonNullable<CatalogFileInput["models"][number]["rollout"]>;
} {
  const d = DEFAULT_ROLLOUT_POLICY;
  const out = {
    ...(r.maxSurge === d.maxSurge ? {} : { maxSurge: r.maxSurge }),
    ...(r.maxUnavailable === d.maxUnavailable ? {} : { maxUnavailable: r.maxUnavailable }),
    ...(r.progressDeadlineMs === d.progressDeadlineMs
      ? {}
      : { progressDeadline: formatDuration(r.progressDeadlineMs) }),
  };
  return Object.keys(out).length === 0 ? {} : { rollout: out };
}

/** The projected catalog in the file's shape (every field written out). */
export function catalogFileFrom(models: readonly ModelSpec[]): CatalogFileInput {
  return {
    models: models.map((m) => ({
      name: m.name,
      replicas: m.replicas,
      // A count reads back as a number, a percentage as text, as operators write them.
      ...(m.minAvailable === undefined
        ? {}
        : { minAvailable: m.minAvailable.endsWith("%") ? m.minAvailable : Number(m.minAvailable) }),
      ...rolloutFileFrom(m.rollout),
      profiles: m.profiles.map((p) => ({
        ...sameInBoth(p),
        memoryPerGpu: formatMemory(p.memoryPerGpuMb),
        // Written out only when set, so a catalog without them round-trips unchanged.
        ...(p.startTimeoutMs > 0 ? { startTimeout: formatDuration(p.startTimeoutMs) } : {}),
        ...(p.startAttempts > 0 ? { startAttempts: p.startAttempts } : {}),
        ...(p.readyTimeoutMs > 0 ? { readyTimeout: formatDuration(p.readyTimeoutMs) } : {}),
      })),
      ...(m.autoscale
        ? {
            autoscale: {
              ...autoscaleInBoth(m.autoscale),
              tolerance: m.autoscale.tolerance,
              scaleUpCooldown: formatDuration(m.autoscale.upCooldownMs),
              scaleDownCooldown: formatDuration(m.autoscale.downCooldownMs),
              stabilization: formatDuration(m.autoscale.stabilizationMs),
            },
          }
        : {}),
    })),
  };
}
