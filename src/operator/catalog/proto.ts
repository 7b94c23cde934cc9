/**
 * The catalog file and the log's `Catalog` message, both ways: apply turns
 * the file into the event; GET turns the catalog in force back into the
 * file's shape, so `GET`, edit, `PUT` round-trips.
 */
import { create } from "@bufbuild/protobuf";
import { type Catalog, CatalogSchema } from "../../gen/llmgw/v1/events_pb.js";
import type { ModelSpec } from "../../projections/index.js";
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

export function toProtoCatalog(file: CatalogFile): Catalog {
  return create(CatalogSchema, {
    models: file.models.map((m) => ({
      name: m.name,
      replicas: m.replicas,
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
              min: m.autoscale.min,
              max: m.autoscale.max,
              metric: m.autoscale.metric,
              target: m.autoscale.target,
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

/** The projected catalog in the file's shape (every field written out). */
export function catalogFileFrom(models: readonly ModelSpec[]): CatalogFileInput {
  return {
    models: models.map((m) => ({
      name: m.name,
      replicas: m.replicas,
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
              min: m.autoscale.min,
              max: m.autoscale.max,
              metric: m.autoscale.metric,
              target: m.autoscale.target,
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
