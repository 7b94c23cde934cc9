/** The node agent's Prometheus metrics, on a registry of its own. */
import { Counter, collectDefaultMetrics, Gauge, Registry } from "prom-client";

export class AgentMetrics {
  readonly registry = new Registry();
  readonly connected = new Gauge({
    name: "llmgw_agent_connected",
    help: "1 while the agent's registration is acknowledged on an open stream",
    registers: [this.registry],
  });
  readonly registrations = new Counter({
    name: "llmgw_agent_registrations_total",
    help: "Registrations a gateway acknowledged",
    registers: [this.registry],
  });
  readonly disconnects = new Counter({
    name: "llmgw_agent_disconnects_total",
    help: "Streams that ended, by whether the gateway asked for it (reconnect) or not (ended)",
    labelNames: ["cause"] as const,
    registers: [this.registry],
  });
  readonly unacknowledged = new Gauge({
    name: "llmgw_agent_unacknowledged_messages",
    help: "Shard statuses and command results said and not yet acknowledged (said again after a reconnect)",
    registers: [this.registry],
  });
  readonly resent = new Counter({
    name: "llmgw_agent_resent_messages_total",
    help: "Unacknowledged messages said again on a new stream",
    registers: [this.registry],
  });
  readonly commands = new Counter({
    name: "llmgw_agent_commands_total",
    help: "Commands received, by command and outcome (ok, refused)",
    labelNames: ["command", "outcome"] as const,
    registers: [this.registry],
  });
  readonly engines = new Gauge({
    name: "llmgw_agent_engines",
    help: "Engine processes supervised, by shard state",
    labelNames: ["state"] as const,
    registers: [this.registry],
  });
  readonly engineExits = new Counter({
    name: "llmgw_agent_engine_exits_total",
    help: "Engine processes that ended: stopped (asked to) or failed (on their own)",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  readonly engineLogRotations = new Counter({
    name: "llmgw_agent_engine_log_rotations_total",
    help: "Engine logs rotated for passing engineLogs.maxFileBytes",
    registers: [this.registry],
  });
  readonly engineLogsDeleted = new Counter({
    name: "llmgw_agent_engine_logs_deleted_total",
    help: "Removed shards whose logs were deleted after engineLogs.removedRetentionMs",
    registers: [this.registry],
  });
  readonly engineLogRequests = new Counter({
    name: "llmgw_agent_engine_log_requests_total",
    help: "`llmgw logs` requests the agent answered, by how they ended (done, not-found, limit, failed, busy) or were cancelled",
    labelNames: ["end"] as const,
    registers: [this.registry],
  });
  readonly engineUnhealthy = new Counter({
    name: "llmgw_agent_engine_unhealthy_total",
    help: "RUNNING engines whose health probe failed failureThreshold times in a row, by what was done (replace, restart-in-place)",
    labelNames: ["action"] as const,
    registers: [this.registry],
  });
  readonly engineMetricsFailures = new Counter({
    name: "llmgw_agent_engine_metrics_failures_total",
    help: "Readings of an engine's metrics endpoint that failed (unreachable, status, garbled, missing): its shard reports no load meanwhile",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });
  readonly adopted = new Gauge({
    name: "llmgw_agent_adopted_engines",
    help: "Engines found still running when this agent process started",
    registers: [this.registry],
  });
  readonly gpuMemoryUsed = new Gauge({
    name: "llmgw_agent_gpu_memory_used_mib",
    help: "Memory in use per GPU as the driver reports it (any process's), MiB",
    labelNames: ["gpu"] as const,
    registers: [this.registry],
  });
  readonly gpuSampleFailures = new Counter({
    name: "llmgw_agent_gpu_sample_failures_total",
    help: "GPU samples that failed (the last good one is reported meanwhile)",
    registers: [this.registry],
  });
  readonly gpuProblems = new Counter({
    name: "llmgw_agent_gpu_problems_total",
    help: "Distinct GPU problems reported, by kind",
    labelNames: ["kind"] as const,
    registers: [this.registry],
  });
  readonly tlsReloads = new Counter({
    name: "llmgw_agent_tls_reloads_total",
    help: "Certificate files read again after they changed, by outcome (ok, error: the old identity is kept)",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });

  /** Adds the process metrics (CPU, memory, event loop). */
  withProcessMetrics(): this {
    collectDefaultMetrics({ register: this.registry });
    return this;
  }
}
