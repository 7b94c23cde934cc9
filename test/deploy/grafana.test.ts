/**
 * deploy/grafana/llmgw.json names only metrics that exist: every llmgw_*
 * series in a panel's query is one the gateway, the reconciler, the API, the
 * router or the agent registers (their prom-client registries, built as the processes build
 * them), and every label it groups by is one of that metric's labels. It
 * also has the panels operators look at first.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import Fastify from "fastify";
import type { Registry } from "prom-client";
import { AgentMetrics } from "../../src/agent/metrics.js";
import { GatewayMetrics } from "../../src/gateway/metrics.js";
import { apiRegistry, instrument } from "../../src/operator/metrics.js";
import { projectionMetrics } from "../../src/projections/runtime/metrics.js";
import { RunnerMetrics } from "../../src/reconciler/runner/index.js";
import { RouterMetrics } from "../../src/router/index.js";

const FILE = join(import.meta.dirname, "../../deploy/grafana/llmgw.json");

interface Panel {
  type: string;
  title: string;
  targets?: Array<{ expr: string }>;
}

/** Labels Prometheus adds to every series, and the bucket bound of histograms. */
const ALWAYS = new Set(["instance", "job", "le"]);

/** Every series name the processes expose, with its labels (histograms as _bucket, _sum and _count). */
async function exposed(): Promise<Map<string, Set<string>>> {
  const gateway = new GatewayMetrics().withProcessMetrics().registry;
  const reconciler = new RunnerMetrics({ defaultMetrics: true }).registry;
  projectionMetrics(reconciler);
  const api = apiRegistry();
  instrument(Fastify(), api);
  projectionMetrics(api);
  const out = new Map<string, Set<string>>();
  const router = new RouterMetrics({ defaultMetrics: true }).registry;
  const agent = new AgentMetrics().registry;
  for (const registry of [gateway, reconciler, api, router, agent] as Registry[]) {
    for (const m of await registry.getMetricsAsJSON()) {
      const labels = new Set(
        (registry.getSingleMetric(m.name) as unknown as { labelNames?: string[] }).labelNames ?? [],
      );
      const names =
        String(m.type) === "histogram" ? ["_bucket", "_sum", "_count"].map((s) => m.name + s) : [m.name];
      for (const n of names) out.set(n, new Set([...(out.get(n) ?? []), ...labels]));
    }
  }
  return out;
}

function panels(): Panel[] {
  const dash = JSON.parse(readFileSync(FILE, "utf8")) as { panels: Panel[] };
  return dash.panels.filter((p) => p.type !== "row");
}

describe("deploy/grafana/llmgw.json", () => {
  it("queries only metrics and labels the processes expose", async () => {
    const known = await exposed();
    assert.ok(known.has("llmgw_reconciler_replicas_ready"));
    for (const p of panels()) {
      assert.ok((p.targets ?? []).length > 0, `panel ${p.title} has no query`);
      for (const { expr } of p.targets ?? []) {
        const metrics = [...expr.matchAll(/\bllmgw_[a-z0-9_]+\b/g)].map((m) => m[0]);
        assert.ok(metrics.length > 0, `panel ${p.title}: ${expr} names no llmgw metric`);
        for (const m of metrics) assert.ok(known.has(m), `panel ${p.title}: no process exposes ${m}`);
        const labels = new Set(metrics.flatMap((m) => [...(known.get(m) ?? [])]));
        for (const by of expr.matchAll(/\bby \(([^)]*)\)/g)) {
          for (const l of by[1]!.split(",").map((s) => s.trim())) {
            assert.ok(
              ALWAYS.has(l) || labels.has(l),
              `panel ${p.title}: ${metrics.join(", ")} has no label ${l}`,
            );
          }
        }
      }
    }
  });

  it("shows streams, publish latency, passes, pending and ready replicas", () => {
    const queries = panels().flatMap((p) => (p.targets ?? []).map((t) => t.expr));
    for (const m of [
      "llmgw_gateway_open_streams",
      "llmgw_gateway_publish_latency_seconds_bucket",
      "llmgw_reconciler_passes_appended_total",
      "llmgw_reconciler_replicas_pending",
      "llmgw_reconciler_replicas_ready",
      "llmgw_reconciler_replicas_desired",
      "llmgw_router_requests_total",
      // The agents on GPU hosts.
      "llmgw_agent_connected",
      "llmgw_agent_disconnects_total",
      "llmgw_agent_unacknowledged_messages",
      "llmgw_agent_engines",
      "llmgw_agent_gpu_memory_used_mib",
      "llmgw_agent_gpu_problems_total",
    ]) {
      assert.ok(
        queries.some((q) => new RegExp(`\\b${m}\\b`).test(q)),
        `no panel shows ${m}`,
      );
    }
  });
});
