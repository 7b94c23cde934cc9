/**
 * Requests per replica as the routers count them: the API reads each
 * router's Prometheus text (`GET <router>/metrics`) when asked, and sums
 * llmgw_router_requests_total, llmgw_router_in_flight and
 * llmgw_router_errors_total by replica. The routers keep no state the API
 * needs beyond those counters, so reading them on demand is all it takes.
 */

export interface ReplicaRequests {
  replicaId: string;
  model: string;
  /** Requests answered by this replica, every status code. */
  requests: number;
  /** Requests in flight to it now. */
  inFlight: number;
  /** Requests that failed on it (the routers' error reasons). */
  errors: number;
}

export interface RouterRead {
  url: string;
  /** When the API read it (ms since the epoch). */
  readAtMs: number;
  /** Why it could not be read; its replicas are then missing from the sums. */
  error?: string;
}

const FAMILIES = {
  llmgw_router_requests_total: "requests",
  llmgw_router_in_flight: "inFlight",
  llmgw_router_errors_total: "errors",
} as const;

const LINE = /^(\w+)\{([^}]*)\}\s+(\S+)/;
const LABEL = /(\w+)="((?:[^"\\]|\\.)*)"/g;

/**
 * The per-replica counters of one router's Prometheus text. Pure. Series
 * without a replica (a request no replica was reached for) are left out.
 */
export function parseRouterMetrics(text: string): ReplicaRequests[] {
  const out = new Map<string, ReplicaRequests>();
  for (const line of text.split("\n")) {
    if (!line.startsWith("llmgw_router_")) continue;
    const m = LINE.exec(line);
    if (!m) continue;
    const field = FAMILIES[m[1] as keyof typeof FAMILIES];
    if (!field) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] as string).matchAll(LABEL)) {
      labels[l[1] as string] = (l[2] as string).replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
    }
    const replicaId = labels["replica"] ?? "";
    const value = Number(m[3]);
    if (replicaId === "" || !Number.isFinite(value)) continue;
    const model = labels["model"] ?? "";
    const key = `${model}\u0000${replicaId}`;
    let r = out.get(key);
    if (!r) {
      r = { replicaId, model, requests: 0, inFlight: 0, errors: 0 };
      out.set(key, r);
    }
    r[field] += value;
  }
  return [...out.values()];
}

/** Sums the routers' counts by model and replica, in replica order. Pure. */
export function sumReplicaRequests(lists: readonly ReplicaRequests[][]): ReplicaRequests[] {
  const out = new Map<string, ReplicaRequests>();
  for (const list of lists) {
    for (const r of list) {
      const key = `${r.model}\u0000${r.replicaId}`;
      const s = out.get(key);
      if (!s) out.set(key, { ...r });
      else {
        s.requests += r.requests;
        s.inFlight += r.inFlight;
        s.errors += r.errors;
      }
    }
  }
  return [...out.values()].sort(
    (a, b) => a.replicaId.localeCompare(b.replicaId) || a.model.localeCompare(b.model),
  );
}

/** Reads one router's metrics; an unreachable router is an error in its entry, never a thrown one. */
export async function readRouter(
  url: string,
  timeoutMs: number,
  nowMs: () => number = Date.now,
): Promise<{ read: RouterRead; replicas: ReplicaRequests[] }> {
  try {
    const res = await fetch(new URL("/metrics", url), { signal: AbortSignal.timeout(timeoutMs) });
    const readAtMs = nowMs();
    if (res.status !== 200) {
      await res.body?.cancel();
      return { read: { url, readAtMs, error: `GET /metrics answered ${res.status}` }, replicas: [] };
    }
    return { read: { url, readAtMs }, replicas: parseRouterMetrics(await res.text()) };
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    const why = e.name === "TimeoutError" ? `no answer within ${timeoutMs} ms` : (e.cause?.code ?? e.message);
    return { read: { url, readAtMs: nowMs(), error: `cannot read ${url}/metrics: ${why}` }, replicas: [] };
  }
}
