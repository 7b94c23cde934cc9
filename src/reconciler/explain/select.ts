/**
 * Which recorded decisions and commands touched a replica or a node. Pure:
 * given the reconcile passes in log order, no I/O. A replica is followed
 * through its shards and commands too: a stop command names only a shard,
 * a re-issue only a command id.
 */
import type { Command, Decision, ReplicaFailed } from "../../gen/llmgw/v1/events_pb.js";
import type { RecordedPass } from "../../log/passes.js";
import { failureReasonName } from "../../projections/index.js";

/** One pass as read from the log (`readPasses` in the log yields them). */
export type { RecordedPass };

/** One decision or command that touched the subject. */
export interface Touch {
  seq: number;
  timeMs: number;
  /** The decision kind (e.g. "replicaPlaced"), or "command". */
  kind: string;
  text: string;
  /** More than the one-line text, when the decision carries it (a failure's reason, exit code and engine output). */
  detail?: string;
}

export function describeCommand(c: Command): string {
  const a = c.action;
  const what = a.case === undefined ? "unknown command" : `${a.case} ${a.value.shardId}`;
  return `${what} (${c.commandId}, attempt ${c.attempt}) to ${c.nodeId} session ${c.sessionId}`;
}

/** A failure's reason, exit code and the engine's last lines, for people. */
function failureDetail(f: ReplicaFailed): string {
  const exit = f.exitCode !== 0 ? `, exit code ${f.exitCode}` : "";
  const output = f.lastOutput.trim() === "" ? "" : `\nlast output:\n${f.lastOutput.trimEnd()}`;
  return `reason ${failureReasonName(f.reason)}${exit}${output}`;
}

function touch(p: RecordedPass, kind: string, text: string): Touch {
  return { seq: p.seq, timeMs: p.timeMs, kind, text };
}

export function touchingReplica(passes: Iterable<RecordedPass>, replicaId: string): Touch[] {
  const shards = new Set<string>();
  const commands = new Set<string>();
  const routed = new Set<string>();
  const out: Touch[] = [];
  for (const p of passes) {
    for (const d of p.pass.decisions) {
      if (decisionTouchesReplica(d, replicaId, shards, commands, routed)) {
        const t = touch(p, d.kind.case ?? "unknown", d.explanation);
        if (d.kind.case === "replicaFailed") t.detail = failureDetail(d.kind.value);
        out.push(t);
      }
    }
    for (const c of p.pass.commands) {
      const a = c.action;
      if (a.case === undefined) continue;
      const mine = a.case === "start" ? a.value.replicaId === replicaId : shards.has(a.value.shardId);
      if (!mine) continue;
      if (a.case === "start") shards.add(a.value.shardId);
      commands.add(c.commandId);
      out.push(touch(p, "command", describeCommand(c)));
    }
  }
  return out;
}

function decisionTouchesReplica(
  d: Decision,
  id: string,
  shards: Set<string>,
  commands: Set<string>,
  routed: Set<string>,
): boolean {
  const k = d.kind;
  switch (k.case) {
    case "endpointsChanged": {
      // Only the changes that add the replica to its model's table or take it out.
      const listed = k.value.endpoints.some((e) => e.replicaId === id);
      const was = routed.has(k.value.model);
      if (listed) routed.add(k.value.model);
      else routed.delete(k.value.model);
      return listed !== was;
    }
    case "replicaCreated":
      return k.value.replicaId === id || k.value.replaces === id;
    case "replicaPlaced":
      if (k.value.replicaId !== id) return false;
      for (const s of k.value.shards) shards.add(s.shardId);
      return true;
    case "shardsAdopted": {
      const mine = k.value.shards.filter((s) => s.replicaId === id);
      for (const s of mine) shards.add(s.shardId);
      return mine.length > 0;
    }
    case "replicaDrainStarted":
      return k.value.replicaId === id || k.value.replacementId === id;
    case "replicaPending":
    case "replicaRemoved":
    case "replicaFailed":
    case "shardBackoff":
    case "shardUnclaimed":
    case "duplicateStopped":
    case "undeliverableHandled":
    case "disruptionBlocked":
    case "rolloutStalled":
    case "rolloutProgressing":
      return k.value.replicaId === id;
    case "commandReissued":
      return commands.has(k.value.commandId);
    case "nodeLiveness":
    case "sessionsExpired":
    case "cooldownStarted":
    case "rolloutStarted":
    case "rolloutCompleted":
    case "autoscaleDecided":
    case undefined:
      return false;
    default: {
      const never: never = k;
      return never;
    }
  }
}

export function touchingNode(passes: Iterable<RecordedPass>, nodeId: string): Touch[] {
  const commands = new Set<string>();
  const out: Touch[] = [];
  for (const p of passes) {
    for (const d of p.pass.decisions) {
      if (decisionTouchesNode(d, nodeId, commands))
        out.push(touch(p, d.kind.case ?? "unknown", d.explanation));
    }
    for (const c of p.pass.commands) {
      if (c.nodeId !== nodeId) continue;
      commands.add(c.commandId);
      out.push(touch(p, "command", describeCommand(c)));
    }
  }
  return out;
}

function decisionTouchesNode(d: Decision, id: string, commands: Set<string>): boolean {
  const k = d.kind;
  switch (k.case) {
    case "replicaPlaced":
      return k.value.shards.some((s) => s.nodeId === id);
    case "sessionsExpired":
      return k.value.sessions.some((s) => s.nodeId === id);
    case "nodeLiveness":
    case "shardsAdopted":
    case "shardUnclaimed":
    case "cooldownStarted":
    case "replicaFailed":
    case "duplicateStopped":
    case "undeliverableHandled":
    case "disruptionBlocked":
      return k.value.nodeId === id;
    case "commandReissued":
      return commands.has(k.value.commandId);
    case "replicaCreated":
    case "replicaPending":
    case "replicaRemoved":
    case "replicaDrainStarted":
    case "shardBackoff":
    case "endpointsChanged":
    case "rolloutStarted":
    case "rolloutStalled":
    case "rolloutProgressing":
    case "rolloutCompleted":
    case "autoscaleDecided":
    case undefined:
      return false;
    default: {
      const never: never = k;
      return never;
    }
  }
}
