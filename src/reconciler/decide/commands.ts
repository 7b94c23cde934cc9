/**
 * Stop and drain commands without a result in time are sent again, with the
 * same id (the agent treats a repeat as the same request), while still
 * wanted: the session they were for is still current and the shard still
 * needs what the command asks. A command for a session that is gone is not
 * re-issued; the node's next session is re-planned from its adoption.
 * Starts have their own rule (start-deadlines.ts). A command a gateway
 * reported undeliverable has left the commands in flight (the fold removes
 * it), so it is never re-issued either: undeliverable.ts handles it.
 */
import { create } from "@bufbuild/protobuf";
import { type Command, CommandSchema } from "../../gen/llmgw/v1/events_pb.js";
import type { CommandState, DeepReadonly, ShardState } from "../../projections/index.js";
import { currentSession, decision, drainDeadline, finished, sortedValues } from "./messages.js";
import type { Pass } from "./pass.js";

export function reissueCommands(pass: Pass): void {
  const { retryBaseMs, retryMaxMs } = pass.config;
  for (const c of sortedValues(pass.work.replicas.commands)) {
    if (c.kind === "start" || c.deadlineMs > pass.nowMs) continue;
    if (currentSession(pass, c.nodeId) !== c.sessionId) continue;
    const cmd = rebuild(pass, c);
    if (!cmd) continue;
    const attempt = c.attempt + 1;
    const wait = Math.min(retryMaxMs, retryBaseMs * 2 ** (c.attempt - 1));
    const deadline = pass.nowMs + wait;
    cmd.attempt = attempt;
    cmd.deadlineUnixMs = BigInt(deadline);
    const ok = pass.add({
      decisions: [
        decision(
          `${c.kind} ${c.shardId} on ${c.nodeId}: no result by its deadline; attempt ${attempt}, next deadline in ${Math.round(wait / 1000)}s`,
          {
            case: "commandReissued",
            value: { commandId: c.commandId, attempt, nextRetryUnixMs: BigInt(deadline) },
          },
        ),
      ],
      commands: [cmd],
    });
    if (!ok) return;
  }
}

function findShard(pass: Pass, c: CommandState): DeepReadonly<ShardState> | undefined {
  const byReplica = pass.work.replicas.replicas.get(c.replicaId)?.shards.find((s) => s.shardId === c.shardId);
  if (byReplica) return byReplica;
  for (const r of pass.work.replicas.replicas.values()) {
    const s = r.shards.find((x) => x.shardId === c.shardId && x.nodeId === c.nodeId);
    if (s) return s;
  }
  return undefined;
}

/** The command again, when it is still wanted; undefined otherwise. */
function rebuild(pass: Pass, c: CommandState): Command | undefined {
  const base = { commandId: c.commandId, nodeId: c.nodeId, sessionId: c.sessionId, replicaId: c.replicaId };
  const shard = findShard(pass, c);
  switch (c.kind) {
    case "start":
      // Starts are re-sent by the start-deadline rule, which also waits for
      // STARTING after the agent acknowledged (start-deadlines.ts).
      return undefined;
    case "drain": {
      if (shard === undefined || shard.desired !== "draining" || finished(shard)) return undefined;
      const r = pass.work.replicas.replicas.get(c.replicaId);
      // The same deadline as the first issue: the drain's, not this attempt's.
      // Past it, the drains rule stops the shard instead.
      const deadline = r ? drainDeadline(pass, r) : 0;
      if (deadline <= pass.nowMs) return undefined;
      return create(CommandSchema, {
        ...base,
        action: {
          case: "drain",
          value: { commandId: c.commandId, shardId: c.shardId, deadlineUnixMs: BigInt(deadline) },
        },
      });
    }
    case "stop":
      // A shard nobody claims any more (unclaimed, duplicate, failed replica) is still to be stopped.
      if (shard && (shard.desired !== "stopped" || finished(shard))) return undefined;
      return create(CommandSchema, {
        ...base,
        action: { case: "stop", value: { commandId: c.commandId, shardId: c.shardId } },
      });
    default: {
      const never: never = c.kind;
      return never;
    }
  }
}
