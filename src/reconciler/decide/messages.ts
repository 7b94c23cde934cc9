/** Builders of the decisions and commands a pass emits, so every rule writes them the same way. */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import type { StartShard } from "../../gen/llmgw/v1/agent_pb.js";
import {
  type Command,
  CommandSchema,
  type Decision,
  DecisionSchema,
  ReplicaFailed_Reason,
} from "../../gen/llmgw/v1/events_pb.js";
import type { DeepReadonly, ReplicaState, ShardState } from "../../projections/index.js";
import type { Pass } from "./pass.js";

export type DecisionKind = MessageInitShape<typeof DecisionSchema>["kind"];

export function decision(explanation: string, kind: DecisionKind): Decision {
  return create(DecisionSchema, { explanation, kind });
}

type Action = MessageInitShape<typeof CommandSchema>["action"];

function command(
  pass: Pass,
  nodeId: string,
  sessionId: string,
  replicaId: string,
  timeoutMs: number,
  action: Action,
): Command {
  return create(CommandSchema, {
    commandId: actionCommandId(action),
    nodeId,
    sessionId,
    attempt: 1,
    deadlineUnixMs: BigInt(pass.nowMs + timeoutMs),
    action,
    replicaId,
  });
}

function actionCommandId(a: Action): string {
  return a && a.case !== undefined ? (a.value.commandId ?? "") : "";
}

/** Where a stop or drain goes, and `replicaId`: whose shard it is (the log says so; agents never see it). */
interface ShardTarget {
  nodeId: string;
  sessionId: string;
  shardId: string;
  replicaId: string;
}

export function stopCommand(pass: Pass, t: ShardTarget): Command {
  const value = { commandId: pass.newCommandId(), shardId: t.shardId };
  return command(pass, t.nodeId, t.sessionId, t.replicaId, pass.config.commandTimeoutMs, {
    case: "stop",
    value,
  });
}

/**
 * A drain that tells the agent when the reconciler will stop the shard
 * anyway (`drainDeadline`). The agent answers a drain at once and exits
 * later, so its result is due like any command's, and never after the
 * drain's end: a lost drain is sent again while draining still means
 * something.
 */
export function drainCommand(pass: Pass, t: ShardTarget, deadlineMs: number): Command {
  const value = { commandId: pass.newCommandId(), shardId: t.shardId, deadlineUnixMs: BigInt(deadlineMs) };
  const timeoutMs = Math.max(0, Math.min(pass.config.commandTimeoutMs, deadlineMs - pass.nowMs));
  return command(pass, t.nodeId, t.sessionId, t.replicaId, timeoutMs, {
    case: "drain",
    value,
  });
}

/**
 * When a replica's drain ends: its start (this pass's time for a drain
 * starting now) plus drainDeadlineMs. The agent is told this time in every
 * DrainShard, re-issues included, and the drains rule stops what still
 * runs once it has passed.
 */
export function drainDeadline(pass: Pass, r: DeepReadonly<ReplicaState>): number {
  const started = r.phase === "draining" ? r.drainStartedMs : pass.nowMs;
  return started + pass.config.drainDeadlineMs;
}

/** A start command; `timeoutMs` is how long the shard has to report STARTING (the profile's start timeout). */
export function startCommand(
  pass: Pass,
  nodeId: string,
  sessionId: string,
  timeoutMs: number,
  start: StartShard,
): Command {
  return command(pass, nodeId, sessionId, start.replicaId, timeoutMs, { case: "start", value: start });
}

/** The node's current session id, or "" when it has none. */
export function currentSession(pass: Pass, nodeId: string): string {
  return pass.work.inventory.nodes.get(nodeId)?.session?.sessionId ?? "";
}

/** A shard that may still be running on a node we can reach (its session is the node's current one). */
export function reachable(pass: Pass, s: DeepReadonly<ShardState>): boolean {
  return s.sessionId !== "" && currentSession(pass, s.nodeId) === s.sessionId;
}

export function finished(s: DeepReadonly<ShardState>): boolean {
  return s.state === "stopped" || s.state === "failed";
}

/** Stop commands for a replica's shards that still run on reachable nodes, except `exceptShardId`. */
export function stopOthers(pass: Pass, r: DeepReadonly<ReplicaState>, exceptShardId: string): Command[] {
  return r.shards
    .filter(
      (s) => s.shardId !== exceptShardId && s.desired !== "stopped" && !finished(s) && reachable(pass, s),
    )
    .map((s) => stopCommand(pass, { ...s, replicaId: r.replicaId }));
}

/** A replica whose replacement exists and is not itself going away. */
export function hasLiveReplacement(pass: Pass, r: DeepReadonly<ReplicaState>): boolean {
  if (r.replacedBy === "") return false;
  const next = pass.work.replicas.replicas.get(r.replacedBy);
  return next !== undefined && next.phase !== "draining";
}

/** What the log says of a failure beyond its text. */
export interface FailureDetail {
  reason?: ReplicaFailed_Reason;
  exitCode?: number;
  lastOutput?: string;
  /** The failing shard still runs (stuck STARTING): stop it too. */
  stopFailing?: boolean;
}

/**
 * The unit for "this replica's shards are gone": it fails and waits to be
 * placed again, and whatever still runs of it elsewhere is stopped. A
 * replica that already has a live replacement is removed instead: placing
 * it again would serve one slot twice.
 */
export function failReplica(
  pass: Pass,
  r: DeepReadonly<ReplicaState>,
  shardId: string,
  nodeId: string,
  error: string,
  detail: FailureDetail = {},
): { decisions: Decision[]; commands: Command[] } {
  const commands = stopOthers(pass, r, detail.stopFailing ? "" : shardId);
  if (hasLiveReplacement(pass, r)) {
    return {
      decisions: [
        decision(`${r.replicaId} removed: ${error}; its replacement ${r.replacedBy} takes over`, {
          case: "replicaRemoved",
          value: { replicaId: r.replicaId, model: r.model, reason: `${error}; replaced by ${r.replacedBy}` },
        }),
      ],
      commands,
    };
  }
  const stops = commands.length > 0 ? `; stopping ${commands.length} other shard(s)` : "";
  return {
    decisions: [
      decision(
        `${r.replicaId} failed${nodeId ? ` on ${nodeId}` : ""}: ${error}${stops}; it will be placed again`,
        {
          case: "replicaFailed",
          value: {
            replicaId: r.replicaId,
            shardId,
            nodeId,
            error,
            reason: detail.reason ?? ReplicaFailed_Reason.UNSPECIFIED,
            exitCode: detail.exitCode ?? 0,
            lastOutput: detail.lastOutput ?? "",
          },
        },
      ),
    ],
    commands,
  };
}

/**
 * Records of a small container sorted by key: iteration never depends on
 * the order records were inserted (a table has its own `sortedValues`).
 */
export function sortedValues<T>(rec: Readonly<Record<string, T>>): T[] {
  return Object.keys(rec)
    .sort()
    .map((k) => rec[k] as T);
}
