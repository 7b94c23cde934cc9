/**
 * How many replicas a model wants in this pass. One place, so that every
 * rule that counts against "desired" (scale, rollouts, budgets) agrees:
 * the catalog's `replicas`, or with autoscale the count its last decision
 * set, within [min, max] (`effectiveReplicas`).
 */
import { type AutoscaleSpec, effectiveReplicas, type ModelSpec } from "../../projections/index.js";
import type { ReconcilerConfig } from "./config.js";
import type { Pass } from "./pass.js";

export function desiredReplicas(pass: Pass, model: ModelSpec): number {
  return effectiveReplicas(pass.work.replicas, model, autoscaleOf(pass.config, model));
}

/** The model's autoscale setting: the config's replacement (what-if), else the catalog's. */
export function autoscaleOf(config: ReconcilerConfig, model: ModelSpec): AutoscaleSpec | undefined {
  return config.autoscale[model.name] ?? model.autoscale;
}
