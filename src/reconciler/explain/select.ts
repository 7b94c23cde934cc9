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

/**
 * What a read of one subject keeps across passes: the replica's shards
 * (from its placement, adoption and start commands), the commands sent for
 * the subject (a re-issue names only a command id), and the models whose
 * routing table lists the replica.
 */
interface Followed {
  readonly id: string;
  readonly shards: Set<string>;
  readonly commands: Set<string>;
  readonly routed: Set<string>;
}

type DecisionKind = NonNullable<Decision["kind"]["case"]>;
type DecisionValue<K extends DecisionKind> = Extract<Decision["kind"], { case: K }>["value"];
type Touches<V> = (value: V, f: Followed) => boolean;

const never = (): boolean => false;
const namesReplica = (v: { replicaId: string }, f: Followed): boolean => v.replicaId === f.id;
const namesNode = (v: { nodeId: string }, f: Followed): boolean => v.nodeId === f.id;
const namesCommand = (v: { commandId: string }, f: Followed): boolean => f.commands.has(v.commandId);

/** The kinds that name a replica only, a node only, both, or neither (by `replicaId` and `nodeId`). */
const REPLICA = { replica: namesReplica, node: never };
const NODE = { replica: never, node: namesNode };
const REPLICA_AND_NODE = { replica: namesReplica, node: namesNode };
const NEITHER = { replica: never, node: never };

/**
 * THE table: for every decision kind, whether a decision of it touches a
 * replica and whether it touches a node. The type makes it name every kind,
 * so a kind added to the proto must say here what it touches.
 */
const TOUCHES: {
  readonly [K in DecisionKind]: {
    readonly replica: Touches<DecisionValue<K>>;
    readonly node: Touches<DecisionValue<K>>;
  };
} = {
  endpointsChanged: {
    // Only the changes that add the replica to its model's table or take it out.
    replica: (v, f) => {
      const listed = v.endpoints.some((e) => e.replicaId === f.id);
      const was = f.routed.has(v.model);
      if (listed) f.routed.add(v.model);
      else f.routed.delete(v.model);
      return listed !== was;
    },
    node: never,
  },
  replicaCreated: { replica: (v, f) => v.replicaId === f.id || v.replaces === f.id, node: never },
  replicaPlaced: {
    replica: (v, f) => {
      if (v.replicaId !== f.id) return false;
      for (const s of v.shards) f.shards.add(s.shardId);
      return true;
    },
    node: (v, f) => v.shards.some((s) => s.nodeId === f.id),
  },
  shardsAdopted: {
    replica: (v, f) => {
      const mine = v.shards.filter((s) => s.replicaId === f.id);
      for (const s of mine) f.shards.add(s.shardId);
      return mine.length > 0;
    },
    node: namesNode,
  },
  replicaDrainStarted: { replica: (v, f) => v.replicaId === f.id || v.replacementId === f.id, node: never },
  replicaPending: REPLICA,
  replicaRemoved: REPLICA,
  replicaFailed: REPLICA_AND_NODE,
  shardBackoff: REPLICA,
  shardUnclaimed: REPLICA_AND_NODE,
  duplicateStopped: REPLICA_AND_NODE,
  undeliverableHandled: REPLICA_AND_NODE,
  disruptionBlocked: REPLICA_AND_NODE,
  rolloutStalled: REPLICA,
  rolloutProgressing: REPLICA,
  commandReissued: { replica: namesCommand, node: namesCommand },
  nodeLiveness: NODE,
  sessionsExpired: { replica: never, node: (v, f) => v.sessions.some((s) => s.nodeId === f.id) },
  cooldownStarted: NODE,
  rolloutStarted: NEITHER,
  rolloutCompleted: NEITHER,
  autoscaleDecided: NEITHER,
};

/** Whether decision `d` touches the followed replica or node (a decision of an unknown kind touches nothing). */
function touches(d: Decision, subject: "replica" | "node", f: Followed): boolean {
  const k = d.kind;
  if (k.case === undefined) return false;
  const row = TOUCHES[k.case] as { readonly [S in "replica" | "node"]: Touches<typeof k.value> };
  return row[subject](k.value, f);
}

export function touchingReplica(passes: Iterable<RecordedPass>, replicaId: string): Touch[] {
  const f: Followed = { id: replicaId, shards: new Set(), commands: new Set(), routed: new Set() };
  const out: Touch[] = [];
  for (const p of passes) {
    for (const d of p.pass.decisions) {
      if (touches(d, "replica", f)) {
        const t = touch(p, d.kind.case ?? "unknown", d.explanation);
        if (d.kind.case === "replicaFailed") t.detail = failureDetail(d.kind.value);
        out.push(t);
      }
    }
    for (const c of p.pass.commands) {
      const a = c.action;
      if (a.case === undefined) continue;
      const mine = a.case === "start" ? a.value.replicaId === replicaId : f.shards.has(a.value.shardId);
      if (!mine) continue;
      if (a.case === "start") f.shards.add(a.value.shardId);
      f.commands.add(c.commandId);
      out.push(touch(p, "command", describeCommand(c)));
    }
  }
  return out;
}

export function touchingNode(passes: Iterable<RecordedPass>, nodeId: string): Touch[] {
  const f: Followed = { id: nodeId, shards: new Set(), commands: new Set(), routed: new Set() };
  const out: Touch[] = [];
  for (const p of passes) {
    for (const d of p.pass.decisions) {
      if (touches(d, "node", f)) out.push(touch(p, d.kind.case ?? "unknown", d.explanation));
    }
    for (const c of p.pass.commands) {
      if (c.nodeId !== nodeId) continue;
      f.commands.add(c.commandId);
      out.push(touch(p, "command", describeCommand(c)));
    }
  }
  return out;
}
