/**
 * How many replicas a model wants in this pass. One place, so that every
 * rule that counts against "desired" (scale, rollouts, budgets) agrees:
 * the catalog's `replicas`, or with autoscale the count its last decision
 * set, within [min, max] (`effectiveReplicas`).
 */
import {
  AUTOSCALE_DEFAULTS,
  type AutoscaleSpec,
  effectiveReplicas,
  type ModelSpec,
} from "../../projections/index.js";
import type { ReconcilerConfig } from "./config.js";
import type { Pass } from "./pass.js";

export function desiredReplicas(pass: Pass, model: ModelSpec): number {
  return effectiveReplicas(pass.work.replicas, model, autoscaleOf(pass.config, model));
}

/**
 * The model's autoscale setting: the catalog's, with the fields the config
 * replaces (what-if); undefined when neither gives min, max, metric and target.
 */
export function autoscaleOf(config: ReconcilerConfig, model: ModelSpec): AutoscaleSpec | undefined {
  const override = config.autoscale[model.name];
  if (!override) return model.autoscale;
  const { min, max, metric, target, ...rest } = { ...AUTOSCALE_DEFAULTS, ...model.autoscale, ...override };
  if (min === undefined || max === undefined || metric === undefined || target === undefined)
    return undefined;
  return { min, max, metric, target, ...rest };
}
