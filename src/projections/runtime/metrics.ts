/**
 * Prometheus metrics of a projection runtime, labelled by projection so
 * several runtimes can share one registry.
 */
import { Counter, Gauge, type Registry } from "prom-client";

export interface ProjectionMetrics {
  lastSeq: Gauge<"projection">;
  eventsFolded: Counter<"projection">;
  foldLag: Gauge<"projection">;
  malformed: Counter<"projection">;
  refused: Counter<"projection" | "kind">;
  snapshots: Counter<"projection" | "result">;
}

function metric<T>(registry: Registry, name: string, make: () => T): T {
  return (registry.getSingleMetric(name) as T | undefined) ?? make();
}

export function projectionMetrics(registry: Registry): ProjectionMetrics {
  const registers = [registry];
  return {
    lastSeq: metric(
      registry,
      "llmgw_projection_last_seq",
      () =>
        new Gauge({
          name: "llmgw_projection_last_seq",
          help: "Last log sequence the projection has folded",
          labelNames: ["projection"],
          registers,
        }),
    ),
    eventsFolded: metric(
      registry,
      "llmgw_projection_events_folded_total",
      () =>
        new Counter({
          name: "llmgw_projection_events_folded_total",
          help: "Events folded into the projection since the process started",
          labelNames: ["projection"],
          registers,
        }),
    ),
    foldLag: metric(
      registry,
      "llmgw_projection_fold_lag_seconds",
      () =>
        new Gauge({
          name: "llmgw_projection_fold_lag_seconds",
          help: "Time between the stream storing the last folded event and the projection folding it",
          labelNames: ["projection"],
          registers,
        }),
    ),
    malformed: metric(
      registry,
      "llmgw_projection_malformed_total",
      () =>
        new Counter({
          name: "llmgw_projection_malformed_total",
          help: "Messages in the log that are not events, recorded and passed over",
          labelNames: ["projection"],
          registers,
        }),
    ),
    refused: metric(
      registry,
      "llmgw_projection_events_refused_total",
      () =>
        new Counter({
          name: "llmgw_projection_events_refused_total",
          help: "Events stored on a subject their kind may not be written to (a forgery or a misplaced writer), passed over and never folded",
          labelNames: ["projection", "kind"],
          registers,
        }),
    ),
    snapshots: metric(
      registry,
      "llmgw_projection_snapshots_total",
      () =>
        new Counter({
          name: "llmgw_projection_snapshots_total",
          help: "Snapshots written (result=ok) or failed (result=error)",
          labelNames: ["projection", "result"],
          registers,
        }),
    ),
  };
}
