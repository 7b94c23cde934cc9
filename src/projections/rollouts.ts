/**
 * The rollouts part of the replicas fold: what the passes decided about a
 * model's rollout (started, stalled, progressing again, completed) and what
 * operators asked (paused, resumed). It records; the reconciler's rollout
 * rule decides.
 */
import type { Decision, Event } from "../gen/llmgw/v1/events_pb.js";
import type { ModelSpec, ReplicaState, ReplicasState, RolloutState } from "./state.js";

/**
 * A copy of model's rollout record (new if it has none), put in its place
 * for the caller to change: records of the small containers are replaced,
 * never changed in place, so a pass's fork (a copy of the container) leaves
 * its input's records as they were.
 */
function rolloutOf(state: ReplicasState, model: string): RolloutState {
  const had = state.rollouts[model];
  let r: RolloutState;
  if (had) r = { ...had };
  else {
    r = {
      model,
      revision: "",
      active: false,
      startedSeq: 0,
      startedMs: 0,
      outdatedAtStart: 0,
      stalled: null,
      completedSeq: 0,
      paused: false,
      pausedBy: "",
      pauseReason: "",
    };
  }
  state.rollouts[model] = r;
  return r;
}

type RolloutDecision = Extract<
  Decision["kind"],
  { case: "rolloutStarted" | "rolloutStalled" | "rolloutCompleted" | "rolloutProgressing" }
>;

export function foldRolloutDecision(
  state: ReplicasState,
  k: RolloutDecision,
  seq: number,
  nowMs: number,
): void {
  const r = rolloutOf(state, k.value.model);
  switch (k.case) {
    case "rolloutStarted":
      r.revision = k.value.revision;
      r.active = true;
      r.startedSeq = seq;
      r.startedMs = nowMs;
      r.outdatedAtStart = k.value.outdated;
      r.stalled = null;
      r.completedSeq = 0;
      return;
    case "rolloutStalled":
      r.stalled = { replicaId: k.value.replicaId, reason: k.value.reason, seq };
      return;
    case "rolloutProgressing":
      r.stalled = null;
      return;
    case "rolloutCompleted":
      r.active = false;
      r.stalled = null;
      r.completedSeq = seq;
      return;
    default: {
      const never: never = k;
      void never;
    }
  }
}

type RolloutIntent = Extract<Event["body"], { case: "rolloutPaused" | "rolloutResumed" }>;

export function foldRolloutIntent(state: ReplicasState, body: RolloutIntent): void {
  const r = rolloutOf(state, body.value.model);
  switch (body.case) {
    case "rolloutPaused":
      r.paused = true;
      r.pausedBy = body.value.operator;
      r.pauseReason = body.value.reason;
      return;
    case "rolloutResumed":
      r.paused = false;
      r.pausedBy = "";
      r.pauseReason = "";
      return;
    default: {
      const never: never = body;
      void never;
    }
  }
}

/** The revision of a model's profile in the catalog in force, or "" when the catalog has no such profile. */
export function profileRevisionInForce(state: ReplicasState, model: string, profile: string): string {
  const m = state.catalog.models.find((x) => x.name === model);
  return m?.profiles.find((p) => p.name === profile)?.revision ?? "";
}

/** Last placed with a revision other than its profile's in the catalog (or whose profile is gone). */
export function staleRevision(model: ModelSpec, r: Pick<ReplicaState, "revision" | "profile">): boolean {
  if (r.revision === "") return false;
  const p = model.profiles.find((x) => x.name === r.profile);
  return p === undefined || p.revision !== r.revision;
}
