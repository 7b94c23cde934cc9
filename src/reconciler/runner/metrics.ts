/**
 * The reconciler's Prometheus metrics, in a registry of its own (several
 * runners in one process, as in tests, must not collide in the global one).
 */
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { type ReadinessCheck, serveRegistry } from "../../metrics-endpoint/index.js";
import { type ReplicasState, readyCounts } from "../../projections/index.js";

export class RunnerMetrics {
  readonly registry = new Registry();
  readonly isLeader: Gauge;
  readonly passesAppended: Counter<"trigger">;
  readonly passDuration: Histogram<"outcome">;
  readonly fencingConflicts: Counter;
  readonly decisions: Counter<"kind">;
  readonly commands: Counter<"action">;
  readonly passErrors: Counter;
  readonly leaseLost: Counter<"reason">;
  readonly leaseReleases: Counter<"outcome">;
  readonly leaseAcquired: Counter<"after">;
  readonly observedSeq: Gauge;
  readonly replicasReady: Gauge<"model">;
  readonly replicasDesired: Gauge<"model">;
  readonly replicasPending: Gauge<"model">;
  /** The replica state the gauges above are read from at each scrape (set by observeReplicas). */
  #replicas: (() => ReplicasState) | undefined;

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    if (opts.defaultMetrics) collectDefaultMetrics({ register: this.registry, prefix: "llmgw_reconciler_" });
    this.isLeader = new Gauge({
      name: "llmgw_reconciler_is_leader",
      help: "1 while this process holds a valid reconciler lease and acts on it",
      registers,
    });
    this.passesAppended = new Counter({
      name: "llmgw_reconciler_passes_appended_total",
      help: "Reconcile passes appended to the log, by trigger",
      labelNames: ["trigger"],
      registers,
    });
    this.passDuration = new Histogram({
      name: "llmgw_reconciler_pass_duration_seconds",
      help: "Time from the start of a pass to its fold by this process's projection (or to nothing to do)",
      labelNames: ["outcome"],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.fencingConflicts = new Counter({
      name: "llmgw_reconciler_fencing_conflicts_total",
      help: "Appends refused because another pass took the log position (the leader stepped down)",
      registers,
    });
    this.decisions = new Counter({
      name: "llmgw_reconciler_decisions_total",
      help: "Decisions appended, by kind",
      labelNames: ["kind"],
      registers,
    });
    this.commands = new Counter({
      name: "llmgw_reconciler_commands_total",
      help: "Commands appended, by action",
      labelNames: ["action"],
      registers,
    });
    this.passErrors = new Counter({
      name: "llmgw_reconciler_pass_errors_total",
      help: "Passes that failed (log unavailable, timeout); retried with backoff",
      registers,
    });
    this.leaseLost = new Counter({
      name: "llmgw_reconciler_lease_lost_total",
      help: "Times this process stopped leading, by reason",
      labelNames: ["reason"],
      registers,
    });
    this.leaseReleases = new Counter({
      name: "llmgw_reconciler_lease_releases_total",
      help: "Lease releases at shutdown: released (key deleted), not-held (a successor's key, left alone), failed",
      labelNames: ["outcome"],
      registers,
    });
    this.leaseAcquired = new Counter({
      name: "llmgw_reconciler_lease_acquired_total",
      help: "Times this process took the lease: after a release seen by the key watch, or by polling (expiry, startup)",
      labelNames: ["after"],
      registers,
    });
    this.observedSeq = new Gauge({
      name: "llmgw_reconciler_observed_seq",
      help: "Last log sequence folded by this process's projection",
      registers,
    });
    // Read from the projection when scraped, so they are never stale and cost nothing between scrapes.
    const metrics = this;
    const perModel = (name: string, help: string, count: (s: ReplicasState) => Record<string, number>) =>
      new Gauge({
        name,
        help,
        labelNames: ["model"] as const,
        registers,
        collect() {
          this.reset();
          const state = metrics.#replicas?.();
          if (!state) return;
          for (const [model, n] of Object.entries(count(state))) this.set({ model }, n);
        },
      });
    this.replicasReady = perModel(
      "llmgw_reconciler_replicas_ready",
      "Replicas ready per model (every shard RUNNING, none draining or stopping), in this process's projection",
      (s) => mapCounts(readyCounts(s), (c) => c.ready),
    );
    this.replicasDesired = perModel(
      "llmgw_reconciler_replicas_desired",
      "Replicas the catalog in force wants per model",
      (s) => mapCounts(readyCounts(s), (c) => c.desired),
    );
    this.replicasPending = perModel(
      "llmgw_reconciler_replicas_pending",
      "Replicas per model waiting for a placement (phase pending)",
      (s) => {
        const out = mapCounts(readyCounts(s), () => 0);
        for (const r of s.replicas.values())
          if (r.phase === "pending") out[r.model] = (out[r.model] ?? 0) + 1;
        return out;
      },
    );
  }

  /** Where the replica gauges read from: the runner's projection. */
  observeReplicas(read: () => ReplicasState): void {
    this.#replicas = read;
  }

  /** Serves GET /metrics on host:port (port 0 picks one; no host: loopback); resolves with the bound address. */
  async listen(hostPort: string, ready?: ReadinessCheck): Promise<{ server: Server; address: AddressInfo }> {
    const { server } = await serveRegistry(this.registry, hostPort, ready);
    return { server, address: server.address() as AddressInfo };
  }
}

function mapCounts<T>(byModel: Record<string, T>, f: (v: T) => number): Record<string, number> {
  return Object.fromEntries(Object.entries(byModel).map(([m, v]) => [m, f(v)]));
}
