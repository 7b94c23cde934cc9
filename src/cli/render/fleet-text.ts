/**
 * The fleet for people: nodes with their GPUs and what runs on each, then
 * replicas with their shards, then commands in flight. Ids are sorted so the
 * same state always prints the same text.
 */
import {
  DEFAULT_ENGINE,
  type FleetState,
  type GpuState,
  type NodeState,
  type ReplicaState,
  shardsByGpu,
} from "../../projections/index.js";
import { isoTime } from "../time.js";

const gib = (mb: number) => (mb / 1024).toFixed(1);

function sortedValues<T>(rec: Record<string, T>): T[] {
  return Object.keys(rec)
    .sort()
    .map((k) => rec[k] as T);
}

function table(rows: string[][], indent: string): string[] {
  const widths: number[] = [];
  for (const r of rows) {
    for (const [i, c] of r.entries()) widths[i] = Math.max(widths[i] ?? 0, c.length);
  }
  return rows.map(
    (r) => indent + r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join("  "),
  );
}

export function renderFleet(state: FleetState, at: { seq: number; timeMs: number }): string {
  const out: string[] = [];
  const nodes = state.inventory.nodes.sortedValues();
  const replicas = state.replicas.replicas.sortedValues();
  out.push(
    `Fleet at sequence ${at.seq} (${isoTime(at.timeMs)}): ${nodes.length} node(s), ${replicas.length} replica(s), ` +
      `${Object.keys(state.inventory.gateways).length} gateway(s), ${state.replicas.passes} reconcile pass(es)`,
  );
  const cat = state.replicas.catalog;
  if (cat.models.length === 0) out.push("Catalog: no models");
  else {
    out.push(`Catalog (sequence ${cat.seq}, applied by ${cat.appliedBy || "-"}):`);
    for (const m of cat.models) {
      const profiles = m.profiles
        .map(
          (p) =>
            `${p.name}: ${p.shards}×${p.gpusPerShard} GPU ${p.gpuProduct || "any"} ${gib(p.memoryPerGpuMb)} GiB/GPU` +
            (p.fabricKind ? ` over ${p.fabricKind}` : "") +
            (p.engine !== DEFAULT_ENGINE ? ` engine ${p.engine}` : ""),
        )
        .join("; ");
      out.push(`  ${m.name} ×${m.replicas}  [${profiles}]`);
    }
  }

  out.push("", "NODES");
  if (nodes.length === 0) out.push("  (none)");
  for (const n of nodes) out.push(...renderNode(state, n));

  out.push("", "REPLICAS");
  if (replicas.length === 0) out.push("  (none)");
  for (const r of replicas) out.push(...renderReplica(r));

  const commands = sortedValues(state.replicas.commands);
  if (commands.length > 0) {
    out.push("", "COMMANDS IN FLIGHT");
    out.push(
      ...table(
        commands.map((c) => [
          c.commandId,
          c.kind,
          c.shardId,
          `on ${c.nodeId}`,
          `session ${c.sessionId}`,
          `attempt ${c.attempt}`,
          `due ${isoTime(c.deadlineMs)}`,
        ]),
        "  ",
      ),
    );
  }
  const cooldowns = sortedValues(state.replicas.cooldowns);
  if (cooldowns.length > 0) {
    out.push("", "COOLDOWNS");
    for (const c of cooldowns) {
      out.push(`  ${c.model} on ${c.nodeId}: ${c.failures} failure(s), until ${isoTime(c.untilMs)}`);
    }
  }
  return `${out.join("\n")}\n`;
}

function renderNode(state: FleetState, n: NodeState): string[] {
  const out: string[] = [];
  const session = n.session
    ? `session ${n.session.sessionId} on ${n.session.gatewayId}`
    : `no session${n.lastCloseReason ? ` (last closed: ${n.lastCloseReason}${n.disconnectedSinceMs ? ` at ${isoTime(n.disconnectedSinceMs)}` : ""})` : ""}`;
  const flags = [
    n.cordoned ? `cordoned${n.cordonReason ? ` (${n.cordonReason})` : ""}` : "",
    n.draining ? "draining" : "",
  ]
    .filter(Boolean)
    .join(", ");
  out.push(
    `  ${n.nodeId}  ${n.liveness}  ${session}${flags ? `  ${flags}` : ""}  agent ${n.agentVersion || "-"}${n.advertiseAddress ? `  at ${n.advertiseAddress}` : ""}`,
  );
  if (n.nodeProblems.length > 0)
    out.push(`    node problems: ${n.nodeProblems.join(", ")} (every GPU kept out of placement)`);
  if (n.fabrics.length > 0)
    out.push(`    fabrics: ${n.fabrics.map((f) => `${f.name} (${f.kind})`).join(", ")}`);
  if (n.gpus.length === 0) {
    out.push("    no GPUs reported");
    return out;
  }
  const byGpu = shardsByGpu(state, n.nodeId);
  const rows = n.gpus.map((g) => {
    const shards = (byGpu.get(g.index) ?? [])
      .map(
        (s) =>
          `${s.replicaId}/${s.shard.shardId} ${s.model} (${s.shard.state}${s.shard.desired !== "running" ? `, want ${s.shard.desired}` : ""})`,
      )
      .join("; ");
    return [
      `gpu${g.index}`,
      g.product,
      `${gib(g.memoryUsedMb)}/${gib(g.memoryTotalMb)} GiB`,
      gpuHealth(g),
      shards || "-",
    ];
  });
  out.push(...table(rows, "    "));
  return out;
}

function renderReplica(r: ReplicaState): string[] {
  const out: string[] = [];
  const extra = [
    r.replaces ? `replaces ${r.replaces}` : "",
    r.replacedBy ? `replaced by ${r.replacedBy}` : "",
    r.drainReason ? `draining: ${r.drainReason}` : "",
    r.restarts > 0 ? `${r.restarts} restart(s), backoff until ${isoTime(r.backoffUntilMs)}` : "",
  ].filter(Boolean);
  out.push(
    `  ${r.replicaId}  ${r.model}  ${r.profile || "-"}  ${r.phase}${extra.length ? `  (${extra.join("; ")})` : ""}`,
  );
  if (r.phase === "pending" && r.pendingReason) out.push(`    pending: ${r.pendingReason}`);
  out.push(
    ...table(
      r.shards.map((s) => [
        s.shardId,
        `rank ${s.rank}`,
        `on ${s.nodeId}`,
        `gpus ${s.gpuIndices.join(",")}`,
        `${s.state}${s.desired !== "running" ? ` (want ${s.desired})` : ""}${s.adopted ? ", adopted" : ""}${s.lastError ? `, last error: ${s.lastError}` : ""}`,
      ]),
      "    ",
    ),
  );
  return out;
}

/** A GPU's health column: its problems, reported faults and cordon, or "ok". */
function gpuHealth(g: GpuState): string {
  const parts = [
    g.problems.length > 0 ? `problems: ${g.problems.join(",")}` : "",
    g.faults.length > 0 ? `faults: ${g.faults.map((f) => `${f.kind}: ${f.message}`).join(",")}` : "",
    g.cordoned ? `cordoned${g.cordonReason ? ` (${g.cordonReason})` : ""}` : "",
  ].filter(Boolean);
  return parts.length > 0 ? parts.join("; ") : "ok";
}
