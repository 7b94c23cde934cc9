/**
 * A shard's lifecycle deadlines: the reconciler's defaults, overridden per
 * profile in the catalog (a large model may load for half an hour; a small
 * one that is not STARTING after a minute is not coming).
 */
import type { ModelSpec, ProfileSpec, ReplicaState } from "../../projections/index.js";
import type { ReconcilerConfig } from "./config.js";

export interface LifecycleLimits {
  startTimeoutMs: number;
  startAttempts: number;
  readyTimeoutMs: number;
}

export function limitsFor(config: ReconcilerConfig, profile: ProfileSpec | undefined): LifecycleLimits {
  return {
    startTimeoutMs: profile?.startTimeoutMs || config.startTimeoutMs,
    startAttempts: profile?.startAttempts || config.startAttempts,
    readyTimeoutMs: profile?.readyTimeoutMs || config.readyTimeoutMs,
  };
}

/** The catalog profile a replica was placed with, or undefined (never placed, or gone from the catalog). */
export function replicaProfile(
  models: readonly ModelSpec[],
  r: Pick<ReplicaState, "model" | "profile">,
): ProfileSpec | undefined {
  return models.find((m) => m.name === r.model)?.profiles.find((p) => p.name === r.profile);
}
