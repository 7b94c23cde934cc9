/** The live one-line summary of `llmgw dev`, from the operator API. */
import type { ApiClient } from "../../operator/client.js";
import type { ReplicaState } from "../../projections/index.js";

interface NodesBody {
  seq: number;
  nodes: Array<{ nodeId: string; liveness: string }>;
}
interface ReplicasBody {
  seq: number;
  replicas: ReplicaState[];
}
interface CatalogBody {
  seq: number;
  catalog: { models?: Array<{ replicas?: number }> };
}

export interface FleetSummary {
  seq: number;
  nodes: number;
  connected: number;
  wanted: number;
  running: number;
  placed: number;
  pending: number;
  draining: number;
}

export async function fetchSummary(api: ApiClient): Promise<FleetSummary> {
  const [nodes, replicas, catalog] = await Promise.all([
    api.request<NodesBody>("GET", "/v1/nodes"),
    api.request<ReplicasBody>("GET", "/v1/replicas"),
    api.request<CatalogBody>("GET", "/v1/catalog"),
  ]);
  const phases = replicas.body.replicas.map((r) => r.phase);
  const count = (p: string) => phases.filter((x) => x === p).length;
  return {
    seq: Math.max(nodes.body.seq, replicas.body.seq),
    nodes: nodes.body.nodes.length,
    connected: nodes.body.nodes.filter((n) => n.liveness === "connected").length,
    wanted: (catalog.body.catalog.models ?? []).reduce((a, m) => a + (m.replicas ?? 0), 0),
    running: count("running"),
    placed: count("placed"),
    pending: count("pending"),
    draining: count("draining"),
  };
}

export function formatSummary(s: FleetSummary): string {
  const parts = [
    `nodes ${s.connected}/${s.nodes} connected`,
    `replicas ${s.running}/${s.wanted} running, ${s.placed} starting, ${s.pending} pending` +
      (s.draining > 0 ? `, ${s.draining} draining` : ""),
    `log seq ${s.seq}`,
  ];
  return parts.join(" · ");
}
