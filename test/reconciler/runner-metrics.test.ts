/**
 * The reconciler's replica gauges: ready, desired and pending replicas per
 * model, read from the projection at each scrape (the Grafana dashboard's
 * capacity panels).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type FleetState, foldFleet } from "../../src/projections/index.js";
import { RunnerMetrics } from "../../src/reconciler/runner/index.js";
import { smallFleet } from "../support/operator-api.js";

function fleet(): FleetState {
  return foldFleet(smallFleet().map((event, i) => ({ event, seq: i + 1, timeMs: 1_000 + i })));
}

/** `name{model="m"} value` lines of a Prometheus text answer, as model → value. */
function byModel(text: string, name: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of text.matchAll(new RegExp(`^${name}\\{model="([^"]+)"\\} (\\S+)$`, "gm"))) {
    out[m[1]!] = Number(m[2]);
  }
  return out;
}

describe("reconciler replica gauges", () => {
  it("count ready, desired and pending replicas per model from the projection", async () => {
    const metrics = new RunnerMetrics();
    let state = fleet();
    metrics.observeReplicas(() => state.replicas);
    const text = await metrics.registry.metrics();
    // The small fleet: llama-3.3-70b wants 2 (r-70b-1 running, r-70b-2 pending), llama-3.1-405b wants 1 (placed, loading).
    assert.deepEqual(byModel(text, "llmgw_reconciler_replicas_ready"), {
      "llama-3.3-70b": 1,
      "llama-3.1-405b": 0,
    });
    assert.deepEqual(byModel(text, "llmgw_reconciler_replicas_desired"), {
      "llama-3.3-70b": 2,
      "llama-3.1-405b": 1,
    });
    assert.deepEqual(byModel(text, "llmgw_reconciler_replicas_pending"), {
      "llama-3.3-70b": 1,
      "llama-3.1-405b": 0,
    });
    // Read again at the next scrape: a state with no catalog has no series left over.
    state = foldFleet([]);
    const empty = await metrics.registry.metrics();
    assert.deepEqual(byModel(empty, "llmgw_reconciler_replicas_ready"), {});
  });

  it("have no series before a runner gives them a projection", async () => {
    const text = await new RunnerMetrics().registry.metrics();
    assert.match(text, /# TYPE llmgw_reconciler_replicas_ready gauge/);
    assert.deepEqual(byModel(text, "llmgw_reconciler_replicas_ready"), {});
  });
});
