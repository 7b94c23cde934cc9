/**
 * What-if comparison: the decisions a pass recorded against those another
 * config makes on the same state, reduced to one outcome per subject
 * (a replica's placement or pending state, a node's liveness, ...) so that
 * wording differences do not count, only different outcomes.
 */
import { type Decision, Liveness } from "../../gen/llmgw/v1/events_pb.js";

export interface Difference {
  subject: string;
  record: string;
  alternative: string;
  /** Nodes either outcome names (where a replica was or would be placed, a node's own subject), sorted. */
  nodes: string[];
}

/** The nodes one pass's decisions name per subject (so a UI can point at them). */
export function outcomeNodes(decisions: readonly Decision[]): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const d of decisions) {
    const k = d.kind;
    if (k.case === "replicaPlaced") {
      const set = out.get(`replica ${k.value.replicaId}`) ?? new Set<string>();
      for (const s of k.value.shards) set.add(s.nodeId);
      out.set(`replica ${k.value.replicaId}`, set);
    }
  }
  return out;
}

export function outcomes(decisions: readonly Decision[]): Map<string, string> {
  const out = new Map<string, string>();
  const add = (subject: string, what: string) => {
    const had = out.get(subject);
    out.set(subject, had ? `${had}; ${what}` : what);
  };
  for (const d of decisions) {
    const k = d.kind;
    switch (k.case) {
      case "replicaPlaced":
        add(
          `replica ${k.value.replicaId}`,
          `placed on ${k.value.shards.map((s) => `${s.nodeId} [${s.gpuIndices.join(",")}]`).join(" + ")} (${k.value.profile})`,
        );
        break;
      case "replicaPending":
        add(`replica ${k.value.replicaId}`, `pending: ${d.explanation}`);
        break;
      case "replicaCreated":
        add(
          `replica ${k.value.replicaId}`,
          k.value.replaces ? `created to replace ${k.value.replaces}` : "created",
        );
        break;
      case "replicaRemoved":
        add(`replica ${k.value.replicaId}`, "removed");
        break;
      case "replicaDrainStarted":
        add(`replica ${k.value.replicaId}`, "drain started");
        break;
      case "replicaFailed":
        add(`replica ${k.value.replicaId}`, `failed: ${k.value.error}`);
        break;
      case "shardBackoff":
        add(`replica ${k.value.replicaId}`, `backoff (restart ${k.value.restarts})`);
        break;
      case "shardsAdopted":
        add(`node ${k.value.nodeId}`, `adopted ${k.value.shards.length} shard(s)`);
        break;
      case "shardUnclaimed":
        add(`node ${k.value.nodeId}`, `unclaimed ${k.value.shardId}`);
        break;
      case "duplicateStopped":
        add(`node ${k.value.nodeId}`, `duplicate ${k.value.shardId} stopped`);
        break;
      case "nodeLiveness":
        add(
          `node ${k.value.nodeId}`,
          `liveness ${Liveness[k.value.liveness]?.toLowerCase() ?? k.value.liveness}`,
        );
        break;
      case "sessionsExpired":
        add(`gateway ${k.value.gatewayId}`, `${k.value.sessions.length} session(s) expired`);
        break;
      case "cooldownStarted":
        add(`node ${k.value.nodeId}`, `cooldown for ${k.value.model}`);
        break;
      case "commandReissued":
        add(`command ${k.value.commandId}`, `re-issued (attempt ${k.value.attempt})`);
        break;
      case "undeliverableHandled":
        add(`command ${k.value.commandId}`, "undeliverable, handled");
        break;
      case "disruptionBlocked":
        add(`replica ${k.value.replicaId}`, `kept serving by the budget of ${k.value.model}`);
        break;
      case "endpointsChanged":
        add(
          `model ${k.value.model}`,
          `routes to ${k.value.endpoints.map((e) => e.replicaId).join(", ") || "nothing"}`,
        );
        break;
      case "rolloutStarted":
        add(`model ${k.value.model}`, `rollout to ${k.value.revision} started`);
        break;
      case "rolloutStalled":
        add(`model ${k.value.model}`, `rollout stalled: ${k.value.reason}`);
        break;
      case "rolloutProgressing":
        add(`model ${k.value.model}`, "rollout progressing again");
        break;
      case "rolloutCompleted":
        add(`model ${k.value.model}`, `rollout to ${k.value.revision} completed`);
        break;
      case "autoscaleDecided":
        add(`autoscale ${k.value.model}`, `${k.value.from} → ${k.value.to}`);
        break;
      case undefined:
        break;
      default: {
        const never: never = k;
        void never;
      }
    }
  }
  return out;
}

export function diffDecisions(record: readonly Decision[], alternative: readonly Decision[]): Difference[] {
  const a = outcomes(record);
  const b = outcomes(alternative);
  const na = outcomeNodes(record);
  const nb = outcomeNodes(alternative);
  const subjects = [...new Set([...a.keys(), ...b.keys()])].sort();
  const out: Difference[] = [];
  for (const subject of subjects) {
    const x = a.get(subject) ?? "nothing";
    const y = b.get(subject) ?? "nothing";
    if (x === y) continue;
    const nodes = new Set([...(na.get(subject) ?? []), ...(nb.get(subject) ?? [])]);
    if (subject.startsWith("node ")) nodes.add(subject.slice("node ".length));
    out.push({ subject, record: x, alternative: y, nodes: [...nodes].sort() });
  }
  return out;
}
