/** `llmgw replicas`: replicas, where they run and why they wait. */
import type { Command } from "commander";
import type { ReplicaView } from "../../operator/index.js";
import { type ApiFlags, call, clientFor, formatTable, printJson, withApiOptions } from "./operator-common.js";

export function registerReplicas(program: Command): void {
  withApiOptions(
    program
      .command("replicas")
      .description("list replicas: model, profile, phase, nodes, why pending")
      .option("--model <name>", "only replicas of this model"),
  ).action(async (flags: ApiFlags & { model?: string }) => {
    const client = clientFor(flags);
    const q = flags.model ? `?model=${encodeURIComponent(flags.model)}` : "";
    const { body } = await call(() =>
      client.get<{ seq: number; replicas: ReplicaView[] }>(`/v1/replicas${q}`),
    );
    if (flags.json) return printJson(body);
    process.stdout.write(`${replicasTable(body.replicas)}\n`);
  });
}

export function replicasTable(replicas: ReplicaView[]): string {
  return formatTable(
    ["REPLICA", "MODEL", "PROFILE", "PHASE", "NODES", "PENDING"],
    replicas.map((r) => [
      r.replicaId,
      r.model,
      r.profile,
      r.phase,
      r.nodeIds.join(","),
      r.phase === "pending" ? r.pendingReason : "",
    ]),
  );
}
