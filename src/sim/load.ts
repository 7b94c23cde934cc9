/**
 * Simulated load: per model, a demand curve over time (requests waiting
 * across the whole model) with seeded noise, shared out over the model's
 * running replicas and reported per shard in heartbeats (Heartbeat.shard_load).
 * More replicas → less load each, which is what an autoscaler acts on.
 *
 * Written `MODEL=CURVE[+noise=F]`, CURVE one of:
 *   const:V                  V all along
 *   steps:V@T/V@T/...        each V from its time T on (before the first: the first V)
 *   ramp:V@T/V@T/...         linear between the points, flat outside them
 *   sine:B~A@P               B + A·sin(2πt/P)
 * T and P are durations (500ms, 30s, 2m) since the fleet started; noise F
 * (0..1) multiplies each reading by 1 ± F, drawn per replica and heartbeat
 * period from the seed, so a seed replays the same load. Evaluation is pure
 * in the time given.
 */
import { seededRng } from "./rng.js";

export type LoadCurve =
  | { kind: "const"; value: number }
  | { kind: "steps" | "ramp"; points: Array<{ atMs: number; value: number }> }
  | { kind: "sine"; base: number; amplitude: number; periodMs: number };

export interface LoadSpec {
  model: string;
  curve: LoadCurve;
  noise: number;
}

/** What one shard reports. */
export interface ShardLoadReading {
  queueDepth: number;
  kvCacheUse: number;
}

const NUMBER = String.raw`\d+(?:\.\d+)?`;
const DURATION = new RegExp(`^(${NUMBER})(ms|s|m|h)$`);
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

function duration(text: string): number | undefined {
  const m = DURATION.exec(text);
  return m ? Number(m[1]) * (UNIT_MS[m[2] as string] as number) : undefined;
}

function value(text: string): number | undefined {
  return new RegExp(`^${NUMBER}$`).test(text) ? Number(text) : undefined;
}

/** Parses one `MODEL=CURVE[+noise=F]`; a string says what is wrong. */
export function parseLoadSpec(text: string): LoadSpec | string {
  const eq = text.indexOf("=");
  if (eq <= 0) return `${JSON.stringify(text)} is not MODEL=CURVE`;
  const model = text.slice(0, eq);
  let rest = text.slice(eq + 1);
  let noise = 0;
  const plus = rest.indexOf("+noise=");
  if (plus >= 0) {
    const n = value(rest.slice(plus + "+noise=".length));
    if (n === undefined || n > 1) return `${JSON.stringify(text)}: noise must be a number from 0 to 1`;
    noise = n;
    rest = rest.slice(0, plus);
  }
  const colon = rest.indexOf(":");
  const kind = colon < 0 ? "" : rest.slice(0, colon);
  const args = rest.slice(colon + 1);
  const bad = (why: string) => `${JSON.stringify(text)}: ${why}`;
  switch (kind) {
    case "const": {
      const v = value(args);
      return v === undefined
        ? bad("const takes one number ≥ 0")
        : { model, curve: { kind, value: v }, noise };
    }
    case "steps":
    case "ramp": {
      const points: Array<{ atMs: number; value: number }> = [];
      for (const p of args.split("/")) {
        const [v, t] = p.split("@");
        const atMs = t === undefined ? undefined : duration(t);
        const n = v === undefined ? undefined : value(v);
        if (n === undefined || atMs === undefined)
          return bad(`${kind} points are VALUE@TIME, e.g. 2@0s/40@30s`);
        if (points.length > 0 && atMs <= (points.at(-1)?.atMs ?? 0))
          return bad(`${kind} times must increase (${t} is not after the point before)`);
        points.push({ atMs, value: n });
      }
      return { model, curve: { kind, points }, noise };
    }
    case "sine": {
      const m = new RegExp(`^(${NUMBER})~(${NUMBER})@(.+)$`).exec(args);
      const periodMs = m ? duration(m[3] as string) : undefined;
      if (!m || !periodMs) return bad("sine is BASE~AMPLITUDE@PERIOD, e.g. 20~15@2m");
      return { model, curve: { kind, base: Number(m[1]), amplitude: Number(m[2]), periodMs }, noise };
    }
    default:
      return bad("the curve is const:V, steps:V@T/..., ramp:V@T/... or sine:B~A@P");
  }
}

/** The curve's demand at `tMs` since the start (never negative). */
export function demandAt(curve: LoadCurve, tMs: number): number {
  switch (curve.kind) {
    case "const":
      return curve.value;
    case "steps": {
      let v = curve.points[0]?.value ?? 0;
      for (const p of curve.points) if (p.atMs <= tMs) v = p.value;
      return v;
    }
    case "ramp": {
      const pts = curve.points;
      const first = pts[0];
      if (!first) return 0;
      if (tMs <= first.atMs) return first.value;
      for (let i = 1; i < pts.length; i++) {
        const a = pts[i - 1] as (typeof pts)[number];
        const b = pts[i] as (typeof pts)[number];
        if (tMs <= b.atMs) return a.value + ((b.value - a.value) * (tMs - a.atMs)) / (b.atMs - a.atMs);
      }
      return (pts.at(-1) as (typeof pts)[number]).value;
    }
    case "sine":
      return Math.max(0, curve.base + curve.amplitude * Math.sin((2 * Math.PI * tMs) / curve.periodMs));
    default: {
      const never: never = curve;
      return never;
    }
  }
}

/** FNV-1a over the text: the seed of one replica's noise in one period. */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/**
 * What a shard of `replicaId` (rank `rank`) reports at `tMs`: the model's
 * demand over its `replicas` running replicas, with the replica's noise of
 * this period; the queue is on rank 0, the KV cache on every rank. `slots`:
 * requests one replica's KV cache holds.
 */
export function shardLoadAt(
  spec: LoadSpec,
  input: {
    seed: number;
    tMs: number;
    periodMs: number;
    replicaId: string;
    rank: number;
    replicas: number;
    slots: number;
  },
): ShardLoadReading {
  const period = Math.floor(input.tMs / input.periodMs);
  const u = seededRng(hash(`${input.seed}/${spec.model}/${input.replicaId}/${period}`))();
  const share =
    (demandAt(spec.curve, input.tMs) / Math.max(1, input.replicas)) * (1 + spec.noise * (2 * u - 1));
  return {
    queueDepth: input.rank === 0 ? Math.max(0, Math.round(share)) : 0,
    kvCacheUse: Math.min(1, Math.max(0, share / input.slots)),
  };
}
