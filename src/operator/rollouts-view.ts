/**
 * What `llmgw rollout status`, `/v1/rollouts` and the UI show of a model's
 * rollout: its revision, its policy, where the rollout stands (started,
 * stalled and why, paused, completed) and how many replicas run the
 * current revision against an older one. Pure: a function of the state.
 */
import { type FleetState, isReady, type ModelSpec, staleRevision } from "../projections/index.js";

export interface RolloutView {
  model: string;
  /** The model's current spec revision. */
  revision: string;
  desired: number;
  ready: number;
  policy: { maxSurge: number; maxUnavailable: number; progressDeadlineMs: number };
  /** Started and not completed. */
  active: boolean;
  paused: boolean;
  pausedBy: string;
  pauseReason: string;
  stalled: { replicaId: string; reason: string; seq: number } | null;
  startedSeq: number;
  completedSeq: number;
  /** Replicas (not draining) on the current revision, and how many of them are ready. */
  current: { replicas: number; ready: number };
  /** Replicas (not draining) on an older revision, and how many of them are ready. */
  outdated: { replicas: number; ready: number };
  /** Replicas draining (old ones on their way out). */
  draining: number;
}

export function rolloutView(state: FleetState, m: ModelSpec): RolloutView {
  const r = state.replicas.rollouts[m.name];
  const current = { replicas: 0, ready: 0 };
  const outdated = { replicas: 0, ready: 0 };
  let draining = 0;
  for (const x of state.replicas.replicas.values()) {
    if (x.model !== m.name) continue;
    if (x.phase === "draining") {
      draining++;
      continue;
    }
    const side = staleRevision(m, x) ? outdated : current;
    side.replicas++;
    if (isReady(x)) side.ready++;
  }
  return {
    model: m.name,
    revision: m.revision,
    desired: m.replicas,
    ready: current.ready + outdated.ready,
    policy: { ...m.rollout },
    active: r?.active ?? false,
    paused: r?.paused ?? false,
    pausedBy: r?.pausedBy ?? "",
    pauseReason: r?.pauseReason ?? "",
    stalled: r?.stalled ? { ...r.stalled } : null,
    startedSeq: r?.startedSeq ?? 0,
    completedSeq: r?.completedSeq ?? 0,
    current,
    outdated,
    draining,
  };
}

/** Every catalog model's rollout, by name. */
export function rolloutViews(state: FleetState): RolloutView[] {
  return [...state.replicas.catalog.models]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((m) => rolloutView(state, m));
}
