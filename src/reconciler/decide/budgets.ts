/**
 * Disruption budgets: a model's `minAvailable` (catalog) is how many of its
 * replicas must stay ready while replicas are taken out of service on
 * purpose (node drains, GPU-fault moves, rollouts). Every rule that takes a
 * ready replica away asks this one function, on the pass's working state,
 * so that what earlier rules of the same pass took (a drain started is no
 * longer ready) counts against what later ones may take.
 */
import { resolveMinAvailable } from "../../projections/index.js";
import { desiredReplicas } from "./desired.js";
import { countReplicas } from "./indexes.js";
import type { Pass } from "./pass.js";

export interface DisruptionBudget {
  model: string;
  /** Replicas the model wants this pass. */
  desired: number;
  /** The budget as the catalog states it ("2", "75%"), or undefined for none. */
  stated: string | undefined;
  /** Ready replicas the budget keeps (a percentage of desired rounded up); 0 without a budget. */
  minAvailable: number;
  /** Ready replicas now: draining, stopping, leaving and loading ones do not count. */
  ready: number;
  /** How many more ready replicas may be taken out of service this pass (never negative). */
  allowed: number;
}

export function disruptionBudget(pass: Pass, model: string): DisruptionBudget {
  const spec = pass.work.replicas.catalog.models.find((m) => m.name === model);
  const desired = spec ? desiredReplicas(pass, spec) : 0;
  const stated = spec?.minAvailable;
  const minAvailable = resolveMinAvailable(stated, desired);
  const ready = countReplicas(pass.work, (c) => c.model === model && c.ready);
  return { model, desired, stated, minAvailable, ready, allowed: Math.max(0, ready - minAvailable) };
}
