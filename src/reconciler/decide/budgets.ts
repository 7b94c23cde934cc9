/**
 * Disruption budgets: a model's `minAvailable` (catalog) is how many of its
 * replicas must stay ready while replicas are taken out of service on
 * purpose (node drains, GPU-fault moves, rollouts). Every rule that takes a
 * ready replica away asks this one function, on the pass's working state,
 * so that what earlier rules of the same pass took (a drain started is no
 * longer ready) counts against what later ones may take.
 *
 * A model that rolls has a second promise: its rollout policy keeps at least
 * `desired − maxUnavailable` ready (`rolloutAllowance`). Every voluntary
 * disruption honours both while the rollout lasts, not only the rollout's own
 * drains: a node drain or GPU-fault move during a rollout with
 * maxUnavailable 0 waits for its replacement to be ready even where
 * minAvailable alone would let the replica go first.
 */
import { type ModelSpec, resolveMinAvailable, staleRevision } from "../../projections/index.js";
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

/** The rollout's policy, while `spec` rolls. */
export interface RolloutFloor {
  /** Ready replicas the rollout keeps: desired − maxUnavailable (never negative). */
  floor: number;
  desired: number;
  maxUnavailable: number;
  /** Ready replicas now, draining ones not counted. */
  ready: number;
  /** How many more ready replicas may be taken out of service this pass (never negative). */
  allowed: number;
}

/**
 * What `spec`'s rollout policy lets voluntary disruption take now, or
 * undefined when the model does not roll. A model rolls while its rollout is
 * active, and already in the pass that starts it: once a replica runs a
 * revision the catalog no longer has (rules before the rollout rule, drains
 * and GPU-fault moves, run before the RolloutStarted decision of that pass).
 */
export function rolloutAllowance(pass: Pass, spec: ModelSpec): RolloutFloor | undefined {
  const rolling =
    pass.work.replicas.rollouts[spec.name]?.active === true ||
    countReplicas(
      pass.work,
      (c) => c.model === spec.name && c.phase !== "draining" && staleRevision(spec, c),
    ) > 0;
  if (!rolling) return undefined;
  const desired = desiredReplicas(pass, spec);
  const { maxUnavailable } = spec.rollout;
  const floor = Math.max(0, desired - maxUnavailable);
  const ready = countReplicas(pass.work, (c) => c.model === spec.name && c.phase !== "draining" && c.ready);
  return { floor, desired, maxUnavailable, ready, allowed: Math.max(0, ready - floor) };
}
