/** The live one-line summary of `llmgw dev`, from the operator API. */
import type { ApiClient } from "../../operator/client.js";

export interface FleetSummary {
  seq: number;
  nodes: number;
  connected: number;
  wanted: number;
  /** Replicas whose every shard runs: the capacity that serves. */
  ready: number;
  placed: number;
  pending: number;
  draining: number;
}

export async function fetchSummary(api: ApiClient): Promise<FleetSummary> {
  const [nodes, replicas, catalog] = await Promise.all([
    api.send((c) => c.GET("/v1/nodes")),
    api.send((c) => c.GET("/v1/replicas")),
    api.send((c) => c.GET("/v1/catalog")),
  ]);
  const phases = replicas.body.replicas.map((r) => r.phase);
  const count = (p: string) => phases.filter((x) => x === p).length;
  return {
    seq: Math.max(nodes.body.seq, replicas.body.seq),
    nodes: nodes.body.nodes.length,
    connected: nodes.body.nodes.filter((n) => n.liveness === "connected").length,
    wanted: (catalog.body.catalog.models ?? []).reduce((a, m) => a + (m.replicas ?? 0), 0),
    ready: replicas.body.models.reduce((a, m) => a + m.ready, 0),
    placed: count("placed"),
    pending: count("pending"),
    draining: count("draining"),
  };
}

export function formatSummary(s: FleetSummary): string {
  const parts = [
    `nodes ${s.connected}/${s.nodes} connected`,
    `replicas ${s.ready}/${s.wanted} ready, ${s.placed} starting, ${s.pending} pending` +
      (s.draining > 0 ? `, ${s.draining} draining` : ""),
    `log seq ${s.seq}`,
  ];
  return parts.join(" · ");
}
