/**
 * Autoscale: a model with an autoscale setting gets its desired replicas
 * from its load. The metric is averaged over the ready replicas that
 * reported load (a replica's queue depth is the sum over its shards, its
 * KV-cache use the highest); the proposal is ceil(ready × value / target),
 * held within [min, max], as a horizontal autoscaler does. Against flapping:
 *   - hysteresis: no decision while the value is within target·(1 ± tolerance);
 *   - direction: load above the band only scales up, below it only down;
 *   - cooldowns from the model's last decision (either way): upCooldownMs
 *     before a scale-up, downCooldownMs (longer) before a scale-down;
 *   - no scale-down while fewer replicas are ready than desired (the load of
 *     replicas still starting is not known yet).
 * Each change is one AutoscaleDecided decision with the value, the target and
 * why; the scale rule, which runs after it, creates or drains replicas
 * towards the new count in the same pass.
 */
import {
  AUTOSCALE_METRICS,
  type AutoscaleMetric,
  type AutoscaleSpec,
  type AutoscaleState,
  isReady,
  type ReplicaState,
} from "../../projections/index.js";
import { autoscaleOf, desiredReplicas } from "./desired.js";
import { decision, sortedValues } from "./messages.js";
import type { Pass } from "./pass.js";

/** The metric over a model's ready replicas. */
export interface LoadReading {
  /** Average per ready replica that reported load. */
  value: number;
  /** Ready replicas it averages. */
  ready: number;
}

export type AutoscaleVerdict =
  | { kind: "scale"; to: number; reason: "above-target" | "below-target"; proposed: number }
  | { kind: "hold"; why: HoldReason };

export type HoldReason =
  | "unknown-metric"
  | "no-load"
  | "within-tolerance"
  | "at-bound"
  | "cooldown"
  | "not-all-ready";

/** A replica's load for `metric`, or undefined when none of its shards reported any. */
function replicaLoad(r: ReplicaState, metric: AutoscaleMetric): number | undefined {
  let out: number | undefined;
  for (const s of r.shards) {
    if (!s.load) continue;
    switch (metric) {
      case "queue_depth":
        out = (out ?? 0) + s.load.queueDepth;
        break;
      case "kv_cache_use":
        out = Math.max(out ?? 0, s.load.kvCacheUse);
        break;
      default: {
        const never: never = metric;
        return never;
      }
    }
  }
  return out;
}

/** The metric averaged over the model's ready replicas that reported load; undefined when none did. */
export function readLoad(replicas: Iterable<ReplicaState>, metric: AutoscaleMetric): LoadReading | undefined {
  let sum = 0;
  let ready = 0;
  for (const r of replicas) {
    if (!isReady(r)) continue;
    const v = replicaLoad(r, metric);
    if (v === undefined) continue;
    sum += v;
    ready++;
  }
  return ready === 0 ? undefined : { value: sum / ready, ready };
}

export function isAutoscaleMetric(m: string): m is AutoscaleMetric {
  return (AUTOSCALE_METRICS as readonly string[]).includes(m);
}

/** The rule itself, pure: what `spec` makes of `reading` for a model that wants `from` replicas at `nowMs`. */
export function autoscaleVerdict(input: {
  spec: AutoscaleSpec;
  from: number;
  reading: LoadReading | undefined;
  last: AutoscaleState | undefined;
  nowMs: number;
}): AutoscaleVerdict {
  const { spec, from, reading, last, nowMs } = input;
  if (!isAutoscaleMetric(spec.metric)) return { kind: "hold", why: "unknown-metric" };
  if (!reading) return { kind: "hold", why: "no-load" };
  const ratio = reading.value / spec.target;
  if (Math.abs(ratio - 1) <= spec.tolerance) return { kind: "hold", why: "within-tolerance" };
  const up = ratio > 1;
  const proposed = Math.ceil(reading.ready * ratio);
  const to = Math.min(spec.max, Math.max(spec.min, proposed));
  if (up ? to <= from : to >= from) return { kind: "hold", why: "at-bound" };
  if (!up && reading.ready < from) return { kind: "hold", why: "not-all-ready" };
  const since = Math.max(last?.lastUpMs ?? 0, last?.lastDownMs ?? 0);
  const cooldown = up ? spec.upCooldownMs : spec.downCooldownMs;
  if (since > 0 && nowMs - since < cooldown) return { kind: "hold", why: "cooldown" };
  return { kind: "scale", to, reason: up ? "above-target" : "below-target", proposed };
}

export function autoscaleModels(pass: Pass): void {
  const replicas = sortedValues(pass.work.replicas.replicas);
  for (const m of pass.work.replicas.catalog.models) {
    const spec = autoscaleOf(pass.config, m);
    if (!spec || !isAutoscaleMetric(spec.metric)) continue;
    const from = desiredReplicas(pass, m);
    const reading = readLoad(
      replicas.filter((r) => r.model === m.name),
      spec.metric,
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
            value: reading.value,
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
  reading: LoadReading,
  v: Extract<AutoscaleVerdict, { kind: "scale" }>,
): string {
  const up = v.reason === "above-target";
  const band = `${fmt(spec.target)} ±${fmt(spec.tolerance * 100)}%`;
  const bound = v.to !== v.proposed ? ` (held to ${up ? "max" : "min"} ${v.to})` : "";
  return (
    `${model} scaled ${up ? "up" : "down"} ${from} → ${v.to}: ${spec.metric} ${fmt(reading.value)} per ready replica ` +
    `(${reading.ready} ready) is ${up ? "above" : "below"} target ${band}; ` +
    `ceil(${reading.ready} × ${fmt(reading.value)} / ${fmt(spec.target)}) = ${v.proposed}${bound}`
  );
}

/** Up to 3 decimals, no trailing zeros: the explanation is for people. */
function fmt(n: number): string {
  return String(Math.round(n * 1000) / 1000);
}
