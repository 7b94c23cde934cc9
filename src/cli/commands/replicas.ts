/** `llmgw replicas`: replicas, where they run and why they wait; once or watched. */
import type { Command } from "commander";
import type { ApiSchemas, ModelReadiness, ReplicaView } from "../../operator/index.js";
import { type ListPrinter, showList } from "./list-output.js";
import { type ApiFlags, formatTable, withApiOptions, withOutputOption } from "./operator-common.js";

type ReplicasAnswer = ApiSchemas["Replicas"];

const printer: ListPrinter<ReplicasAnswer> = {
  table: (body, wide) => `${readinessTable(body.models)}\n\n${replicasTable(body.replicas, wide)}`,
};

export function registerReplicas(program: Command): void {
  withOutputOption(
    withApiOptions(
      program
        .command("replicas")
        .description(
          "list replicas: ready/desired per model, then each replica's phase, nodes, why it waits and why it last failed (-o wide adds shards and sequences; --watch prints again on every change)",
        )
        .option("--model <name>", "only replicas of this model"),
    ),
  )
    .option("-w, --watch", "print the list again whenever it changes (follows GET /v1/stream), until Ctrl-C")
    .action(async (flags: ApiFlags & { model?: string; watch?: boolean }) => {
      const query = flags.model ? { model: flags.model } : {};
      await showList(
        flags,
        (c) => c.send((api) => api.GET("/v1/replicas", { params: { query } })),
        printer,
        (b) => ({ models: b.models, replicas: b.replicas }),
      );
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

export function replicasTable(replicas: ReplicaView[], wide = false): string {
  const header = [
    "REPLICA",
    "MODEL",
    "PROFILE",
    "REVISION",
    "PHASE",
    "READY",
    "NODES",
    "PENDING",
    "LAST FAILURE",
  ];
  if (wide) {
    return formatTable(
      [...header, "SHARDS", "CREATED SEQ"],
      replicas.map((r) => [
        ...replicaRow(r),
        r.shards.map((s) => `${s.shardId}:${s.state}`).join(","),
        String(r.createdSeq),
      ]),
    );
  }
  return formatTable(header, replicas.map(replicaRow));
}

function replicaRow(r: ReplicaView): string[] {
  return [
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
  ];
}
