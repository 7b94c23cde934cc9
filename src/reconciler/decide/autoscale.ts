/**
 * Autoscale: a model with an autoscale setting gets its desired replicas
 * from its load. The metric is averaged over the ready replicas that
 * reported load (a replica's queue depth is the sum over its shards, its
 * KV-cache use the highest); the proposal is ceil(ready × value / target),
 * held within [min, max], as a horizontal autoscaler does. Against flapping:
 *   - hysteresis: no decision while the value is within target·(1 ± tolerance);
 *   - stabilization: the load must have stayed beyond the band for the
 *     whole stabilization window (every ready replica reported from before
 *     it): a scale-up acts on the window's lowest value, a scale-down on its
 *     highest, so one noisy reading moves nothing;
 *   - direction: load above the band only scales up, below it only down;
 *   - a change must bring the value closer to the target: at the new count
 *     the same load would read value·ready/to per replica, and a change that
 *     would land as far (or farther) on the other side is not made (with
 *     few replicas one more or less moves the value by more than the band,
 *     and noise would otherwise swing it back and forth);
 *   - cooldowns from the model's last decision (either way): upCooldownMs
 *     before a scale-up, downCooldownMs (longer) before a scale-down;
 *   - no scale-down while fewer replicas are ready than desired (the load of
 *     replicas still starting is not known yet).
 * Each change is one AutoscaleDecided decision with the value, the target and
 * why; the scale rule, which runs after it, creates or drains replicas
 * towards the new count in the same pass.
 */

import type { DeepReadonly } from "../../projections/index.js";
import {
  AUTOSCALE_METRICS,
  type AutoscaleMetric,
  type AutoscaleSpec,
  type AutoscaleState,
  isReady,
  LOAD_SAMPLES_MAX,
  type LoadSample,
  type ReplicaState,
} from "../../projections/index.js";
import { autoscaleOf, desiredReplicas } from "./desired.js";
import { replicasWhere } from "./indexes.js";
import { decision } from "./messages.js";
import type { Pass } from "./pass.js";

/** The metric over a model's ready replicas, averaged per replica. */
export interface ModelLoad {
  /** What they report now. */
  value: number;
  /** The lowest and highest over the stabilization window. */
  low: number;
  high: number;
  /** Ready replicas it averages (those that reported load). */
  ready: number;
  /** Every one of them reported load from before the window: low and high cover all of it. */
  covered: boolean;
}

type Combine = (a: number, b: number) => number;

/** A replica's load from its shards: queue depths add up (the queue is on rank 0), the fullest KV cache counts. */
const COMBINE: Record<AutoscaleMetric, Combine> = {
  queue_depth: (a, b) => a + b,
  kv_cache_use: (a, b) => Math.max(a, b),
};

function sampleValue(s: LoadSample, metric: AutoscaleMetric): number {
  switch (metric) {
    case "queue_depth":
      return s.queueDepth;
    case "kv_cache_use":
      return s.kvCacheUse;
    default: {
      const never: never = metric;
      return never;
    }
  }
}

/** The samples in force from `sinceMs` on: those after it and the last one before it. */
function windowOf(samples: readonly LoadSample[], sinceMs: number): LoadSample[] {
  const i = samples.findIndex((x) => x.atMs >= sinceMs);
  return i < 0 ? samples.slice(-1) : samples.slice(Math.max(0, i - 1));
}

/** A replica's now / low / high, or undefined when none of its shards reported load. */
function replicaLoad(
  r: DeepReadonly<ReplicaState>,
  metric: AutoscaleMetric,
  sinceMs: number,
): { value: number; low: number; high: number; covered: boolean } | undefined {
  const combine = COMBINE[metric];
  let out: { value: number; low: number; high: number; covered: boolean } | undefined;
  for (const s of r.shards) {
    const all = s.load?.samples ?? [];
    const samples = windowOf(all, sinceMs);
    const first = samples[0];
    if (!first) continue;
    const w = samples.map((x) => sampleValue(x, metric));
    const v = {
      value: w.at(-1) as number,
      low: Math.min(...w),
      high: Math.max(...w),
      // A full sample list was trimmed: the shard reported all along, its last samples stand for the window.
      covered: first.atMs <= sinceMs || all.length >= LOAD_SAMPLES_MAX,
    };
    out = out
      ? {
          value: combine(out.value, v.value),
          low: combine(out.low, v.low),
          high: combine(out.high, v.high),
          covered: out.covered && v.covered,
        }
      : v;
  }
  return out;
}

/** The metric over the model's ready replicas that reported load, from `sinceMs` on; undefined when none did. */
export function readLoad(
  replicas: Iterable<DeepReadonly<ReplicaState>>,
  metric: AutoscaleMetric,
  sinceMs: number,
): ModelLoad | undefined {
  const sum = { value: 0, low: 0, high: 0 };
  let ready = 0;
  let covered = true;
  for (const r of replicas) {
    if (!isReady(r)) continue;
    const v = replicaLoad(r, metric, sinceMs);
    if (!v) continue;
    sum.value += v.value;
    sum.low += v.low;
    sum.high += v.high;
    covered &&= v.covered;
    ready++;
  }
  if (ready === 0) return undefined;
  return { value: sum.value / ready, low: sum.low / ready, high: sum.high / ready, ready, covered };
}

export type AutoscaleVerdict =
  | {
      kind: "scale";
      to: number;
      reason: "above-target" | "below-target";
      proposed: number;
      /** The value it acted on: the window's lowest (up) or highest (down). */
      value: number;
    }
  | { kind: "hold"; why: HoldReason };

export type HoldReason =
  | "unknown-metric"
  | "no-load"
  | "within-tolerance"
  | "unsteady"
  | "at-bound"
  | "overshoot"
  | "cooldown"
  | "not-all-ready";

export function isAutoscaleMetric(m: string): m is AutoscaleMetric {
  return (AUTOSCALE_METRICS as readonly string[]).includes(m);
}

/** The rule itself, pure: what `spec` makes of `reading` for a model that wants `from` replicas at `nowMs`. */
export function autoscaleVerdict(input: {
  spec: AutoscaleSpec;
  from: number;
  reading: ModelLoad | undefined;
  last: AutoscaleState | undefined;
  nowMs: number;
}): AutoscaleVerdict {
  const { spec, from, reading, last, nowMs } = input;
  if (!isAutoscaleMetric(spec.metric)) return { kind: "hold", why: "unknown-metric" };
  if (!reading) return { kind: "hold", why: "no-load" };
  // The epsilon keeps a value exactly on the band's edge inside it despite floating point (11/10 - 1 > 0.1).
  const beyond = (v: number) => Math.abs(v / spec.target - 1) > spec.tolerance + 1e-9;
  if (!beyond(reading.value)) return { kind: "hold", why: "within-tolerance" };
  const up = reading.value > spec.target;
  // The whole window beyond the band on the same side: the lowest for up, the highest for down.
  const value = up ? reading.low : reading.high;
  if (!reading.covered || !beyond(value) || value > spec.target !== up)
    return { kind: "hold", why: "unsteady" };
  const ratio = value / spec.target;
  const proposed = Math.ceil(reading.ready * ratio);
  const to = Math.min(spec.max, Math.max(spec.min, proposed));
  if (up ? to <= from : to >= from) return { kind: "hold", why: "at-bound" };
  if (!up && reading.ready < from) return { kind: "hold", why: "not-all-ready" };
  const projected = (reading.value * reading.ready) / to / spec.target;
  const across = up ? projected < 1 - spec.tolerance : projected > 1 + spec.tolerance;
  if (across && Math.abs(projected - 1) >= Math.abs(ratio - 1)) return { kind: "hold", why: "overshoot" };
  const since = Math.max(last?.lastUpMs ?? 0, last?.lastDownMs ?? 0);
  const cooldown = up ? spec.upCooldownMs : spec.downCooldownMs;
  if (since > 0 && nowMs - since < cooldown) return { kind: "hold", why: "cooldown" };
  return { kind: "scale", to, reason: up ? "above-target" : "below-target", proposed, value };
}

export function autoscaleModels(pass: Pass): void {
  for (const m of pass.work.replicas.catalog.models) {
    const spec = autoscaleOf(pass.config, m);
    if (!spec || !isAutoscaleMetric(spec.metric)) continue;
    const from = desiredReplicas(pass, m);
    const reading = readLoad(
      replicasWhere(pass.work, (c) => c.model === m.name),
      spec.metric,
      pass.nowMs - spec.stabilizationMs,
    );
    const v = autoscaleVerdict({
      spec,
      from,
      reading,
      last: pass.work.replicas.autoscale[m.name],
      nowMs: pass.nowMs,
    });
    if (v.kind === "hold" || !reading) continue;
    const ok = pass.add({
      decisions: [
        decision(explain(m.name, spec, from, reading, v), {
          case: "autoscaleDecided",
          value: {
            model: m.name,
            from,
            to: v.to,
            metric: spec.metric,
            value: v.value,
            target: spec.target,
            readyReplicas: reading.ready,
            reason: v.reason,
          },
        }),
      ],
      commands: [],
    });
    if (!ok) return;
  }
}

function explain(
  model: string,
  spec: AutoscaleSpec,
  from: number,
  reading: ModelLoad,
  v: Extract<AutoscaleVerdict, { kind: "scale" }>,
): string {
  const up = v.reason === "above-target";
  const band = `${fmt(spec.target)} ±${fmt(spec.tolerance * 100)}%`;
  const bound = v.to !== v.proposed ? ` (held to ${up ? "max" : "min"} ${v.to})` : "";
  return (
    `${model} scaled ${up ? "up" : "down"} ${from} → ${v.to}: ${spec.metric} per ready replica ` +
    `(${reading.ready} ready) stayed ${up ? "above" : "below"} target ${band} for ${fmt(spec.stabilizationMs / 1000)}s ` +
    `(${up ? "lowest" : "highest"} ${fmt(v.value)}, now ${fmt(reading.value)}); ` +
    `ceil(${reading.ready} × ${fmt(v.value)} / ${fmt(spec.target)}) = ${v.proposed}${bound}`
  );
}

/** Up to 3 decimals, no trailing zeros: the explanation is for people. */
function fmt(n: number): string {
  return String(Math.round(n * 1000) / 1000);
}
