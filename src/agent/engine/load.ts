/**
 * How busy an engine is, from its Prometheus endpoint: requests waiting,
 * requests running, KV cache in use. The text format is parsed by a
 * library (labels, escapes, comments and timestamps are its business); a
 * reading is all or nothing, so an engine that cannot be read reports no
 * load rather than a made-up zero.
 */
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import type { EngineMetricsConfig } from "./config.js";

export interface EngineLoad {
  queueDepth: number;
  /** 0 to 1; 0 when the engine exports no such metric (TGI). */
  kvCacheUse: number;
  /** Undefined when the engine exports no such metric: an idle drain then waits for its deadline. */
  running: number | undefined;
}

export type LoadReading = { ok: true; load: EngineLoad } | { ok: false; reason: LoadFailure; detail: string };

/** Why a reading failed, as a metric label. */
export type LoadFailure = "unreachable" | "status" | "garbled" | "missing";

type Names = Pick<EngineMetricsConfig, "queueDepth" | "kvCacheUse" | "running">;

/**
 * The summed value of the first of `names` the text holds (an engine may
 * export one series per model or label set), or undefined.
 */
function metricValue(families: ReturnType<typeof parsePrometheusTextFormat>, names: readonly string[]) {
  for (const name of names) {
    const f = families.find((x) => x.name === name);
    if (!f) continue;
    let sum = 0;
    for (const m of f.metrics) {
      const v = Number(m.value);
      if (!Number.isFinite(v)) return undefined;
      sum += v;
    }
    if (f.metrics.length > 0) return sum;
  }
  return undefined;
}

/** The load a metrics page says. Pure. */
export function loadOfMetricsText(text: string, names: Names): LoadReading {
  let families: ReturnType<typeof parsePrometheusTextFormat>;
  try {
    families = parsePrometheusTextFormat(text);
  } catch (err) {
    return { ok: false, reason: "garbled", detail: err instanceof Error ? err.message : String(err) };
  }
  const queueDepth = metricValue(families, names.queueDepth);
  if (queueDepth === undefined)
    return {
      ok: false,
      reason: families.length === 0 ? "garbled" : "missing",
      detail:
        families.length === 0
          ? "no metric in the Prometheus text format"
          : `none of ${names.queueDepth.join(", ")} is exported`,
    };
  const kv = metricValue(families, names.kvCacheUse);
  const running = metricValue(families, names.running);
  return {
    ok: true,
    load: {
      queueDepth: Math.max(0, Math.round(queueDepth)),
      kvCacheUse: kv === undefined ? 0 : Math.min(1, Math.max(0, kv)),
      running: running === undefined ? undefined : Math.max(0, Math.round(running)),
    },
  };
}

/** Reads an engine's metrics page; never throws. */
export async function readEngineLoad(
  url: string,
  names: Names,
  timeoutMs: number,
  get: (url: string, init: { signal: AbortSignal }) => Promise<Response> = fetch,
): Promise<LoadReading> {
  let text: string;
  try {
    const r = await get(url, { signal: AbortSignal.timeout(timeoutMs) });
    if (r.status !== 200) {
      await r.body?.cancel();
      return { ok: false, reason: "status", detail: `${url} answered ${r.status}` };
    }
    text = await r.text();
  } catch (err) {
    return {
      ok: false,
      reason: "unreachable",
      detail: `${url}: ${err instanceof Error ? err.message : String(err)}`,
    };
  }
  return loadOfMetricsText(text, names);
}
