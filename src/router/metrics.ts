/** The router's Prometheus metrics, on a registry of its own. */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

/** The labels of what is counted per upstream: the model asked for and the replica that answered. */
const BY_REPLICA = ["model", "replica"] as const;

export class RouterMetrics {
  readonly registry = new Registry();
  readonly requests = this.#counter(
    "llmgw_router_requests_total",
    'Requests answered, by model, replica ("" when none was reached) and HTTP status',
    [...BY_REPLICA, "code"],
  );
  readonly errors = this.#counter(
    "llmgw_router_errors_total",
    "Requests that failed, by model, replica and reason (bad_request, unknown_model, no_replica, upstream, aborted, ...)",
    [...BY_REPLICA, "reason"],
  );
  readonly retries = this.#counter(
    "llmgw_router_retries_total",
    "Attempts given up on a replica before the first response byte and tried on another, by model, the replica that failed and why",
    [...BY_REPLICA, "reason"],
  );
  readonly ejections = this.#counter(
    "llmgw_router_ejections_total",
    "Replicas kept out for --eject-ms after a failure (passive health), by model and replica",
    BY_REPLICA,
  );
  readonly inFlight = new Gauge({
    name: "llmgw_router_in_flight",
    help: "Requests in flight through this router, by model and replica",
    labelNames: BY_REPLICA,
    registers: [this.registry],
  });
  readonly ttfb = this.#modelLatency(
    "llmgw_router_time_to_first_byte_seconds",
    "From the request's arrival to the upstream's response head, by model",
  );
  readonly duration = this.#modelLatency(
    "llmgw_router_request_duration_seconds",
    "From the request's arrival to the last byte of its response, by model",
  );
  readonly tableStale = new Gauge({
    name: "llmgw_router_table_stale",
    help: "1 while the router cannot follow the routing table (NATS unreachable): it serves the last table it read",
    registers: [this.registry],
  });
  readonly tableEndpoints = new Gauge({
    name: "llmgw_router_table_endpoints",
    help: "Ready endpoints in the routing table, by model",
    labelNames: ["model"] as const,
    registers: [this.registry],
  });
  readonly tableChanges = this.#counter(
    "llmgw_router_table_changes_total",
    "Routing-table changes applied (one per model written or deleted in the bucket)",
    [],
  );
  readonly tableApplyDelay = new Histogram({
    name: "llmgw_router_table_apply_delay_seconds",
    help: "From the bucket storing a table change to this router applying it (clocks of two machines)",
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
    registers: [this.registry],
  });

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    if (opts.defaultMetrics) collectDefaultMetrics({ register: this.registry });
  }

  /** A counter on this registry: the router counts four things per upstream and one per table change. */
  #counter<L extends string>(name: string, help: string, labelNames: readonly L[]): Counter<L> {
    return new Counter({ name, help, labelNames, registers: [this.registry] });
  }

  /** A latency histogram by model, in the router's latency buckets (time to first byte and the whole request alike). */
  #modelLatency(name: string, help: string): Histogram<"model"> {
    return new Histogram({
      name,
      help,
      labelNames: ["model"],
      buckets: LATENCY_BUCKETS,
      registers: [this.registry],
    });
  }
}
