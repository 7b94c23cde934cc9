/**
 * One short line about an event's content, for `llmgw events`. Every kind is
 * covered (the switch is exhaustive); a kind from a newer version says so.
 */
import { ShardStatus_State } from "../../gen/llmgw/v1/agent_pb.js";
import {
  CommandUndeliverable_Action,
  CommandUndeliverable_Reason,
  type Decision,
  type Event,
  Liveness,
  SessionClosed_Reason,
} from "../../gen/llmgw/v1/events_pb.js";
import { gpuProblemLine } from "../../projections/convert.js";

const gib = (mb: bigint) => (Number(mb) / 1024).toFixed(0);
const enumName = (table: Record<number, string>, v: number, prefix: string) =>
  (table[v] ?? String(v)).replace(prefix, "").toLowerCase();

export function eventKind(event: Event): string {
  return event.body.case ?? "unknown";
}

export function summarizeEvent(event: Event): string {
  const b = event.body;
  switch (b.case) {
    case "sessionOpened": {
      const v = b.value;
      const reg = v.registration;
      const running = reg?.runningShards.map((s) => s.shardId).join(",") || "nothing";
      return `${v.nodeId} session ${v.sessionId} on ${v.gatewayId} (${v.identity || "-"}): ${reg?.gpus.length ?? 0} GPU(s), running ${running}`;
    }
    case "sessionClosed": {
      const v = b.value;
      return `${v.nodeId} session ${v.sessionId} on ${v.gatewayId} closed: ${enumName(SessionClosed_Reason, v.reason, "REASON_")}${v.detail ? ` (${v.detail})` : ""}`;
    }
    case "hardwareChanged": {
      const v = b.value;
      return `${v.nodeId} session ${v.sessionId} re-registered: ${v.registration?.gpus.length ?? 0} GPU(s), ${v.registration?.runningShards.length ?? 0} running shard(s)`;
    }
    case "usageChanged": {
      const v = b.value;
      const used = v.gpuMemoryUsedMb.map(gib).join(",");
      const problems = [...v.newProblems, ...v.gpuProblems.map(gpuProblemLine)];
      return `${v.nodeId} session ${v.sessionId} GPU memory used [${used}] GiB${problems.length ? `; problems: ${problems.join(", ")}` : ""}`;
    }
    case "shardStatus": {
      const v = b.value;
      const s = v.status;
      const state = s ? enumName(ShardStatus_State, s.state, "STATE_") : "?";
      return `${v.nodeId} shard ${s?.shardId ?? "?"} of ${s?.replicaId ?? "?"}: ${state}${s?.error ? ` (${s.error}, exit ${s.exitCode})` : ""}`;
    }
    case "commandResult": {
      const v = b.value;
      const r = v.result;
      return `${v.nodeId} command ${r?.commandId ?? "?"}: ${r?.ok ? "ok" : `failed${r?.error ? `: ${r.error}` : ""}`}`;
    }
    case "gatewayStarted":
      return `gateway ${b.value.gatewayId} started on ${b.value.listenAddress} (version ${b.value.version}, lease ${b.value.leaseTtlMs} ms)`;
    case "gatewayDraining":
      return `gateway ${b.value.gatewayId} draining ${b.value.openSessions} session(s)`;
    case "gatewayStopped":
      return `gateway ${b.value.gatewayId} stopped${b.value.reason ? `: ${b.value.reason}` : ""}`;
    case "catalogChanged": {
      const models = b.value.catalog?.models ?? [];
      const list = models.map((m) => `${m.name}×${m.replicas}`).join(", ") || "no models";
      return `catalog by ${b.value.appliedBy || "-"}: ${list}`;
    }
    case "nodeCordoned":
      return `${b.value.nodeId} cordoned by ${b.value.operator || "-"}${b.value.reason ? `: ${b.value.reason}` : ""}`;
    case "nodeUncordoned":
      return `${b.value.nodeId} uncordoned by ${b.value.operator || "-"}`;
    case "nodeDrainRequested":
      return `${b.value.nodeId} drain requested by ${b.value.operator || "-"}${b.value.reason ? `: ${b.value.reason}` : ""}`;
    case "gpuProblemsCleared": {
      const v = b.value;
      const what = v.nodeLevel ? "node-level problems" : `GPU ${v.gpuIndex} problems`;
      return `${v.nodeId} ${what} cleared by ${v.operator || "-"}${v.reason ? `: ${v.reason}` : ""}`;
    }
    case "gpuCordoned":
      return `${b.value.nodeId} GPU ${b.value.gpuIndex} cordoned by ${b.value.operator || "-"}${b.value.reason ? `: ${b.value.reason}` : ""}`;
    case "gpuUncordoned":
      return `${b.value.nodeId} GPU ${b.value.gpuIndex} uncordoned by ${b.value.operator || "-"}`;
    case "commandUndeliverable": {
      const v = b.value;
      return `${v.nodeId} ${enumName(CommandUndeliverable_Action, v.action, "ACTION_")} ${v.commandId} (attempt ${v.attempt}) undeliverable on ${v.gatewayId}: ${enumName(CommandUndeliverable_Reason, v.reason, "REASON_")}${v.detail ? ` (${v.detail})` : ""}`;
    }
    case "reconcilePass": {
      const v = b.value;
      const decisions = v.decisions.map(decisionSummary).join("; ");
      const commands = v.commands.map(
        (c) => `${c.action.case ?? "?"} ${c.action.value?.shardId ?? "?"}@${c.nodeId}`,
      );
      return `pass by ${v.leaderId} (${v.trigger || "-"}, observed ${v.observedSeq}): ${v.decisions.length} decision(s)${decisions ? ` [${decisions}]` : ""}, ${v.commands.length} command(s)${commands.length ? ` [${commands.join(", ")}]` : ""}${v.truncated ? " (truncated)" : ""}`;
    }
    case undefined:
      return "an event kind this version does not know (kept in the log, skipped by projections)";
    default: {
      const never: never = b;
      return String(never);
    }
  }
}

function decisionSummary(d: Decision): string {
  const k = d.kind;
  switch (k.case) {
    case "replicaCreated":
      return `create ${k.value.replicaId} (${k.value.model})${k.value.replaces ? ` replacing ${k.value.replaces}` : ""}`;
    case "replicaPlaced":
      return `place ${k.value.replicaId} ${k.value.profile} on ${k.value.shards.map((s) => s.nodeId).join("+")}`;
    case "replicaPending":
      return `pending ${k.value.replicaId}: ${d.explanation}`;
    case "shardsAdopted":
      return `adopt ${k.value.shards.map((s) => s.shardId).join(",")} on ${k.value.nodeId}`;
    case "shardUnclaimed":
      return `unclaimed ${k.value.shardId} on ${k.value.nodeId}`;
    case "nodeLiveness":
      return `${k.value.nodeId} ${enumName(Liveness, k.value.liveness, "LIVENESS_")}`;
    case "sessionsExpired":
      return `gateway ${k.value.gatewayId} expired (${k.value.sessions.length} session(s))`;
    case "replicaRemoved":
      return `remove ${k.value.replicaId}${k.value.reason ? ` (${k.value.reason})` : ""}`;
    case "replicaDrainStarted":
      return `drain ${k.value.replicaId}${k.value.replacementId ? ` for ${k.value.replacementId}` : ""}`;
    case "commandReissued":
      return `reissue ${k.value.commandId} (attempt ${k.value.attempt})`;
    case "cooldownStarted":
      return `cooldown ${k.value.model} on ${k.value.nodeId}`;
    case "shardBackoff":
      return `backoff ${k.value.replicaId} (${k.value.restarts} restart(s))`;
    case "replicaFailed":
      return `failed ${k.value.replicaId} (${k.value.shardId} on ${k.value.nodeId})`;
    case "duplicateStopped":
      return `duplicate ${k.value.shardId} on ${k.value.nodeId}`;
    case "undeliverableHandled":
      return `undeliverable ${k.value.commandId} on ${k.value.nodeId} handled`;
    case "endpointsChanged":
      return `endpoints ${k.value.model}: [${k.value.endpoints.map((e) => e.replicaId).join(",")}]`;
    case undefined:
      return "unknown decision";
    default: {
      const never: never = k;
      return String(never);
    }
  }
}
