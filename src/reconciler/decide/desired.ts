/**
 * How many replicas a model wants in this pass. One place, so that every
 * rule that counts against "desired" (scale, rollouts, budgets) agrees.
 */
import type { ModelSpec } from "../../projections/index.js";
import type { Pass } from "./pass.js";

export function desiredReplicas(_pass: Pass, model: ModelSpec): number {
  return model.replicas;
}
