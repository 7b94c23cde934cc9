/** `llmgw replicas`: replicas, where they run and why they wait. */
import type { Command } from "commander";
import type { ModelReadiness, ReplicaView } from "../../operator/index.js";
import { type ApiFlags, call, clientFor, formatTable, printJson, withApiOptions } from "./operator-common.js";

export function registerReplicas(program: Command): void {
  withApiOptions(
    program
      .command("replicas")
      .description(
        "list replicas: ready/desired per model, then each replica's phase, nodes, why it waits and why it last failed",
      )
      .option("--model <name>", "only replicas of this model"),
  ).action(async (flags: ApiFlags & { model?: string }) => {
    const client = clientFor(flags);
    const q = flags.model ? `?model=${encodeURIComponent(flags.model)}` : "";
    const { body } = await call(() =>
      client.get<{ seq: number; models: ModelReadiness[]; replicas: ReplicaView[] }>(`/v1/replicas${q}`),
    );
    if (flags.json) return printJson(body);
    process.stdout.write(`${readinessTable(body.models)}\n\n${replicasTable(body.replicas)}\n`);
  });
}

/** Capacity per model: only ready replicas (every shard RUNNING) count; MIN AVAILABLE is the disruption budget. */
export function readinessTable(models: ModelReadiness[]): string {
  return formatTable(
    ["MODEL", "READY", "MIN AVAILABLE"],
    models.map((m) => [
      m.model,
      `${m.ready}/${m.desired}`,
      m.minAvailable === "" || m.minAvailable === String(m.keepsReady)
        ? m.minAvailable
        : `${m.minAvailable} (${m.keepsReady})`,
    ]),
  );
}

export function replicasTable(replicas: ReplicaView[]): string {
  return formatTable(
    ["REPLICA", "MODEL", "PROFILE", "REVISION", "PHASE", "READY", "NODES", "PENDING", "LAST FAILURE"],
    replicas.map((r) => [
      r.replicaId,
      r.model,
      r.profile,
      r.revision || "-",
      r.phase,
      r.ready ? "yes" : "no",
      r.nodeIds.join(","),
      r.phase === "pending" ? r.pendingReason : "",
      r.lastFailure
        ? `${r.lastFailure.reason} on ${r.lastFailure.nodeId || "?"}: ${r.lastFailure.message}`
        : "",
    ]),
  );
}
