/**
 * One event in a line for people, with the nodes and replicas it concerns
 * (what the API's event list filters on): the one renderer `llmgw events`,
 * the API and the web UI share. Every kind is covered (the switches are
 * exhaustive); a kind from a newer version says so. Pure.
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

export interface DescribedEvent {
  /** The event kind (`sessionOpened`, `reconcilePass`, …), or "unknown" for a kind this version does not know. */
  kind: string;
  text: string;
  nodeIds: string[];
  replicaIds: string[];
}

const gib = (mb: bigint) => (Number(mb) / 1024).toFixed(0);
const enumName = (table: Record<number, string>, v: number, prefix: string) =>
  (table[v] ?? String(v)).replace(prefix, "").toLowerCase();

export function describeEvent(event: Event): DescribedEvent {
  const { nodes, replicas } = eventSubjects(event);
  return {
    kind: event.body.case ?? "unknown",
    text: eventText(event),
    nodeIds: [...nodes].sort(),
    replicaIds: [...replicas].sort(),
  };
}

function eventText(event: Event): string {
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
    case "duplicateIdentity": {
      const v = b.value;
      return `${v.nodeId}: a second agent (${v.newcomerRemoteAddress || "?"}) presents the identity of live session ${v.heldSessionId} on ${v.heldGatewayId} (${v.heldRemoteAddress || "?"}); refused on ${v.gatewayId}, retry after ${v.retryAfterMs} ms (${v.attempts} attempt(s))`;
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
    case "rolloutPaused":
      return `rollout of ${b.value.model} paused by ${b.value.operator || "-"}${b.value.reason ? `: ${b.value.reason}` : ""}`;
    case "rolloutResumed":
      return `rollout of ${b.value.model} resumed by ${b.value.operator || "-"}`;
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

/** The nodes and replicas an event concerns. */
function eventSubjects(event: Event): { nodes: Set<string>; replicas: Set<string> } {
  const nodes = new Set<string>();
  const replicas = new Set<string>();
  const b = event.body;
  switch (b.case) {
    case "sessionOpened":
      nodes.add(b.value.nodeId);
      for (const s of b.value.registration?.runningShards ?? []) replicas.add(s.replicaId);
      break;
    case "shardStatus":
      nodes.add(b.value.nodeId);
      if (b.value.status) replicas.add(b.value.status.replicaId);
      break;
    case "commandUndeliverable":
      nodes.add(b.value.nodeId);
      if (b.value.replicaId) replicas.add(b.value.replicaId);
      break;
    case "nodeCordoned":
    case "gpuCordoned":
    case "nodeUncordoned":
    case "gpuUncordoned":
    case "nodeDrainRequested":
    case "gpuProblemsCleared":
    case "sessionClosed":
    case "duplicateIdentity":
    case "hardwareChanged":
    case "usageChanged":
    case "commandResult":
      nodes.add(b.value.nodeId);
      break;
    case "reconcilePass":
      for (const d of b.value.decisions) decisionSubjects(d, nodes, replicas);
      for (const c of b.value.commands) {
        nodes.add(c.nodeId);
        // A stop or drain names only its shard; the command says whose it is
        // (logs written before Command.replica_id do not).
        if (c.replicaId) replicas.add(c.replicaId);
        if (c.action.case === "start") replicas.add(c.action.value.replicaId);
      }
      break;
    case "gatewayStarted":
    case "gatewayDraining":
    case "gatewayStopped":
    case "catalogChanged":
    case "rolloutPaused":
    case "rolloutResumed":
    case undefined:
      break;
    default: {
      const never: never = b;
      void never;
    }
  }
  return { nodes, replicas };
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
    case "disruptionBlocked":
      return `blocked ${k.value.replicaId} on ${k.value.nodeId} (${k.value.model} ${k.value.ready} ready, floor ${k.value.minAvailable})`;
    case "rolloutStarted":
      return `rollout ${k.value.model} to ${k.value.revision} (${k.value.outdated} outdated)`;
    case "rolloutStalled":
      return `rollout ${k.value.model} stalled on ${k.value.replicaId}`;
    case "rolloutProgressing":
      return `rollout ${k.value.model} progressing (${k.value.replicaId} ready)`;
    case "rolloutCompleted":
      return `rollout ${k.value.model} completed at ${k.value.revision}`;
    case "autoscaleDecided":
      return `autoscale ${k.value.model} ${k.value.from} → ${k.value.to} (${k.value.metric} ${Math.round(k.value.value * 1000) / 1000}, target ${k.value.target})`;
    case undefined:
      return "unknown decision";
    default: {
      const never: never = k;
      return String(never);
    }
  }
}

function decisionSubjects(d: Decision, nodes: Set<string>, replicas: Set<string>): void {
  const k = d.kind;
  switch (k.case) {
    case "replicaPlaced":
      replicas.add(k.value.replicaId);
      for (const s of k.value.shards) nodes.add(s.nodeId);
      return;
    case "replicaCreated":
      replicas.add(k.value.replicaId);
      if (k.value.replaces) replicas.add(k.value.replaces);
      return;
    case "replicaDrainStarted":
      replicas.add(k.value.replicaId);
      if (k.value.replacementId) replicas.add(k.value.replacementId);
      return;
    case "replicaPending":
    case "replicaRemoved":
    case "shardBackoff":
      replicas.add(k.value.replicaId);
      return;
    case "replicaFailed":
    case "shardUnclaimed":
    case "duplicateStopped":
    case "disruptionBlocked":
      replicas.add(k.value.replicaId);
      nodes.add(k.value.nodeId);
      return;
    case "undeliverableHandled":
      nodes.add(k.value.nodeId);
      if (k.value.replicaId) replicas.add(k.value.replicaId);
      return;
    case "shardsAdopted":
      nodes.add(k.value.nodeId);
      for (const s of k.value.shards) replicas.add(s.replicaId);
      return;
    case "nodeLiveness":
    case "cooldownStarted":
      nodes.add(k.value.nodeId);
      return;
    case "sessionsExpired":
      for (const s of k.value.sessions) nodes.add(s.nodeId);
      return;
    case "rolloutStalled":
    case "rolloutProgressing":
      if (k.value.replicaId) replicas.add(k.value.replicaId);
      return;
    case "rolloutStarted":
    case "rolloutCompleted":
    case "commandReissued":
    // The whole table of a model: naming every listed replica would match
    // passes that did not change them; the drain or failure decision next to
    // it names the replica that left.
    case "endpointsChanged":
    // A model's count: the replicas it creates or drains are named by the decisions that do.
    case "autoscaleDecided":
    case undefined:
      return;
    default: {
      const never: never = k;
      void never;
    }
  }
}
