/**
 * One event in a line for people, with the nodes and replicas it concerns
 * (what the event list filters on). Pure.
 */
import { type Decision, type Event, SessionClosed_Reason } from "../gen/llmgw/v1/events_pb.js";
import { gpuProblemLine, shardStateName } from "../projections/convert.js";
import { describeCommand } from "../reconciler/index.js";

export interface DescribedEvent {
  /** The event kind (`sessionOpened`, `reconcilePass`, …), or "unknown" for a kind this version does not know. */
  kind: string;
  text: string;
  nodeIds: string[];
  replicaIds: string[];
}

export function describeEvent(event: Event): DescribedEvent {
  const nodes = new Set<string>();
  const replicas = new Set<string>();
  const out = (kind: string, text: string): DescribedEvent => ({
    kind,
    text,
    nodeIds: [...nodes].sort(),
    replicaIds: [...replicas].sort(),
  });
  const b = event.body;
  switch (b.case) {
    case "sessionOpened": {
      nodes.add(b.value.nodeId);
      const reg = b.value.registration;
      for (const s of reg?.runningShards ?? []) replicas.add(s.replicaId);
      return out(
        b.case,
        `${b.value.nodeId} connected to ${b.value.gatewayId} (${reg?.gpus.length ?? 0} GPUs, ${reg?.runningShards.length ?? 0} shards running)`,
      );
    }
    case "sessionClosed":
      nodes.add(b.value.nodeId);
      return out(
        b.case,
        `${b.value.nodeId} disconnected from ${b.value.gatewayId} (${SessionClosed_Reason[b.value.reason]?.toLowerCase() ?? b.value.reason})`,
      );
    case "hardwareChanged":
      nodes.add(b.value.nodeId);
      return out(b.case, `${b.value.nodeId} re-registered its hardware`);
    case "usageChanged": {
      nodes.add(b.value.nodeId);
      const all = [...b.value.newProblems, ...b.value.gpuProblems.map(gpuProblemLine)];
      const problems = all.length > 0 ? `; new problems: ${all.join(", ")}` : "";
      return out(b.case, `${b.value.nodeId} GPU memory use changed${problems}`);
    }
    case "shardStatus": {
      nodes.add(b.value.nodeId);
      const st = b.value.status;
      if (st) replicas.add(st.replicaId);
      const err = st?.error ? `: ${st.error}` : "";
      return out(
        b.case,
        `${st?.shardId ?? "?"} on ${b.value.nodeId} is ${st ? shardStateName(st.state) : "?"}${err}`,
      );
    }
    case "commandResult": {
      nodes.add(b.value.nodeId);
      const r = b.value.result;
      return out(
        b.case,
        `${b.value.nodeId}: command ${r?.commandId ?? "?"} ${r?.ok ? "done" : `failed: ${r?.error ?? ""}`}`,
      );
    }
    case "gatewayStarted":
      return out(b.case, `gateway ${b.value.gatewayId} started`);
    case "gatewayDraining":
      return out(b.case, `gateway ${b.value.gatewayId} draining`);
    case "gatewayStopped":
      return out(b.case, `gateway ${b.value.gatewayId} stopped`);
    case "commandUndeliverable": {
      const v = b.value;
      nodes.add(v.nodeId);
      if (v.replicaId) replicas.add(v.replicaId);
      return out(
        b.case,
        `gateway ${v.gatewayId} could not deliver command ${v.commandId} to ${v.nodeId}${reason(v.detail)}`,
      );
    }
    case "catalogChanged": {
      const models = b.value.catalog?.models ?? [];
      return out(
        b.case,
        `catalog applied by ${b.value.appliedBy || "?"}: ${models.map((m) => `${m.name}×${m.replicas}`).join(", ") || "no models"}`,
      );
    }
    case "nodeCordoned":
      nodes.add(b.value.nodeId);
      return out(b.case, `${b.value.nodeId} cordoned by ${b.value.operator}${reason(b.value.reason)}`);
    case "nodeUncordoned":
      nodes.add(b.value.nodeId);
      return out(b.case, `${b.value.nodeId} uncordoned by ${b.value.operator}`);
    case "nodeDrainRequested":
      nodes.add(b.value.nodeId);
      return out(b.case, `${b.value.nodeId} drain requested by ${b.value.operator}${reason(b.value.reason)}`);
    case "gpuProblemsCleared": {
      const v = b.value;
      nodes.add(v.nodeId);
      const what = v.nodeLevel ? "node-level problems" : `GPU ${v.gpuIndex} problems`;
      return out(b.case, `${v.nodeId} ${what} cleared by ${v.operator}${reason(v.reason)}`);
    }
    case "gpuCordoned":
      nodes.add(b.value.nodeId);
      return out(
        b.case,
        `${b.value.nodeId} GPU ${b.value.gpuIndex} cordoned by ${b.value.operator}${reason(b.value.reason)}`,
      );
    case "gpuUncordoned":
      nodes.add(b.value.nodeId);
      return out(b.case, `${b.value.nodeId} GPU ${b.value.gpuIndex} uncordoned by ${b.value.operator}`);
    case "reconcilePass": {
      const p = b.value;
      for (const d of p.decisions) decisionSubjects(d, nodes, replicas);
      for (const c of p.commands) {
        nodes.add(c.nodeId);
        // A stop or drain names only its shard; the command says whose it is
        // (logs written before Command.replica_id do not).
        if (c.replicaId) replicas.add(c.replicaId);
        if (c.action.case === "start") replicas.add(c.action.value.replicaId);
      }
      const lines = [...p.decisions.map((d) => d.explanation), ...p.commands.map((c) => describeCommand(c))];
      return out(
        b.case,
        `pass by ${p.leaderId} (${p.trigger}): ${p.decisions.length} decision(s), ${p.commands.length} command(s)${lines.length > 0 ? ` — ${lines.slice(0, 3).join("; ")}${lines.length > 3 ? "; …" : ""}` : ""}`,
      );
    }
    case undefined:
      return out("unknown", "an event of a kind this version does not know");
    default: {
      const never: never = b;
      return never;
    }
  }
}

function reason(r: string): string {
  return r ? ` (${r})` : "";
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
    case "commandReissued":
    // The whole table of a model: naming every listed replica would match
    // passes that did not change them; the drain or failure decision next to
    // it names the replica that left.
    case "endpointsChanged":
    case undefined:
      return;
    default: {
      const never: never = k;
      void never;
    }
  }
}
