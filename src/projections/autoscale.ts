/**
 * Autoscaling in the fold: the load shards report (UsageChanged.shard_load,
 * the latest per shard) and the replica count each model's AutoscaleDecided
 * decisions set. Pure; the rule that decides is the reconciler's
 * (`reconciler/decide/autoscale.ts`).
 */
import type { AutoscaleDecided, UsageChanged } from "../gen/llmgw/v1/events_pb.js";
import { shardKey, shardOwners } from "./fleet-indexes.js";
import { isCurrentSession } from "./inventory.js";
import type { EventMeta } from "./projection.js";
import type {
  AutoscaleSpec,
  AutoscaleState,
  InventoryView,
  ModelSpec,
  ReplicasState,
  ReplicasView,
  ShardState,
} from "./state.js";

/**
 * How far back a shard's load samples reach (the longest stabilization
 * window), and at most how many are kept: the gateway writes at most one
 * usage event per session per interval (3 s by default: 40 in 2 minutes).
 * The state every pass copies stays small; a shard whose load moves at every
 * interval of a short one has its window read from its last 48 samples.
 */
export const LOAD_HISTORY_MS = 2 * 60_000;
export const LOAD_SAMPLES_MAX = 48;

/** Each reported shard's load is its newest sample (shards of the current session only). */
export function foldShardLoad(
  state: ReplicasState,
  v: UsageChanged,
  meta: EventMeta,
  inventory: InventoryView,
): void {
  if (v.shardLoad.length === 0 || !isCurrentSession(inventory, v.nodeId, v.sessionId)) return;
  for (const l of v.shardLoad) {
    const owner = state.replicas.lookup(shardOwners, shardKey(v.nodeId, l.shardId));
    const at = (s: Readonly<ShardState>) => s.shardId === l.shardId && s.nodeId === v.nodeId;
    if (!state.replicas.get(owner)?.shards.some(at)) continue;
    state.replicas.update(owner, (r) => {
      const shard = r.shards.find(at) as ShardState;
      const samples = shard.load?.samples ?? [];
      samples.push({
        atMs: meta.timeMs,
        queueDepth: l.queueDepth,
        // A value out of range from a broken agent is held to the range the metric means.
        kvCacheUse: Number.isFinite(l.kvCacheUse) ? Math.min(1, Math.max(0, l.kvCacheUse)) : 0,
      });
      // Keep the window and the one sample before it (in force at its start).
      const inWindow = samples.findIndex((x) => x.atMs >= meta.timeMs - LOAD_HISTORY_MS);
      const from = Math.max(0, inWindow - 1, samples.length - LOAD_SAMPLES_MAX);
      shard.load = { samples: samples.slice(from), seq: meta.seq };
    });
  }
}

/** A pass's AutoscaleDecided: the model wants `to` from now on; the cooldown counts from the pass's time. */
export function foldAutoscaleDecided(
  state: ReplicasState,
  v: AutoscaleDecided,
  nowMs: number,
  seq: number,
  explanation: string,
): void {
  const a = autoscaleEntry(state, v.model);
  a.replicas = v.to;
  if (v.to > v.from) a.lastUpMs = nowMs;
  else a.lastDownMs = nowMs;
  a.lastSeq = seq;
  a.lastExplanation = explanation;
}

/**
 * A new catalog: a model gone from it forgets its autoscaling; one whose
 * `replicas` changed starts again from them (an operator's explicit count
 * wins over the last decision). Cooldowns are kept.
 */
export function foldCatalogAutoscale(state: ReplicasState, before: readonly ModelSpec[]): void {
  const now = new Map(state.catalog.models.map((m) => [m.name, m]));
  const old = new Map(before.map((m) => [m.name, m]));
  for (const name of Object.keys(state.autoscale)) {
    const m = now.get(name);
    const a = state.autoscale[name] as AutoscaleState;
    if (!m) delete state.autoscale[name];
    else if (old.get(name)?.replicas !== m.replicas) state.autoscale[name] = { ...a, replicas: null };
  }
}

/** A copy of model's autoscale record (new if it has none), put in its place: see rollouts.ts `rolloutOf`. */
function autoscaleEntry(state: ReplicasState, model: string): AutoscaleState {
  const had = state.autoscale[model];
  const a: AutoscaleState = had
    ? { ...had }
    : { replicas: null, lastUpMs: 0, lastDownMs: 0, lastSeq: 0, lastExplanation: "" };
  state.autoscale[model] = a;
  return a;
}

/**
 * How many replicas a model wants: with autoscale (`spec`, the catalog's
 * unless a caller replaces it), the count the last decision set, or the
 * catalog's `replicas`, held within [min, max]; without, `replicas`.
 */
export function effectiveReplicas(
  state: ReplicasView,
  model: ModelSpec,
  spec: AutoscaleSpec | undefined = model.autoscale,
): number {
  if (!spec) return model.replicas;
  const n = state.autoscale[model.name]?.replicas ?? model.replicas;
  return Math.min(spec.max, Math.max(spec.min, n));
}
