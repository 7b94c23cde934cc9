/**
 * Commands a gateway could not deliver (CommandUndeliverable): the gateway
 * that held the session says so at once, so nothing waits for the
 * command's deadline. Each report gets one UndeliverableHandled decision
 * (the fold then forgets it):
 * - an undelivered start means the placement cannot happen on that
 *   session: the replica fails back to pending and placement re-plans it.
 *   Not the model's fault, so it does not count toward the model×node
 *   cooldown, and no crash backoff applies.
 * - an undelivered stop or drain is not sent again: the session is gone,
 *   and the node's next registration is handled by adoption, which stops
 *   the shards nobody claims.
 * A report whose session the log still calls current waits for the
 * SessionClosed the gateway appends next: failed now, the replica could be
 * placed on that same dying session again.
 */
import { ReplicaFailed_Reason } from "../../gen/llmgw/v1/events_pb.js";
import type { DeepReadonly, ReplicaState, UndeliverableState } from "../../projections/index.js";
import { currentSession, decision, failReplica, sortedValues } from "./messages.js";
import type { Pass, Unit } from "./pass.js";

export function handleUndeliverable(pass: Pass): void {
  for (const u of sortedValues(pass.work.replicas.undeliverable)) {
    if (u.sessionId !== "" && currentSession(pass, u.nodeId) === u.sessionId) continue;
    if (!pass.add(handle(pass, u))) return;
  }
}

function handle(pass: Pass, u: UndeliverableState): Unit {
  const what = `${u.kind} ${u.commandId} (attempt ${u.attempt}) for ${u.shardId || "?"} on ${u.nodeId}`;
  const why = `${u.reason}${u.detail ? `: ${u.detail}` : ""}`;
  const handled = (outcome: string) =>
    decision(`${what} undeliverable on gateway ${u.gatewayId} (${why}); ${outcome}`, {
      case: "undeliverableHandled",
      value: {
        commandId: u.commandId,
        attempt: u.attempt,
        nodeId: u.nodeId,
        sessionId: u.sessionId,
        replicaId: u.replicaId,
        shardId: u.shardId,
      },
    });
  switch (u.kind) {
    case "start": {
      const r = waitingStart(pass, u);
      if (!r) return { decisions: [handled("the shard has moved on since; nothing to do")], commands: [] };
      const unit = failReplica(
        pass,
        r,
        u.shardId,
        u.nodeId,
        `start command undeliverable: ${u.detail || u.reason}`,
        { reason: ReplicaFailed_Reason.UNDELIVERABLE },
      );
      return {
        decisions: [handled(`${r.replicaId} is re-planned`), ...unit.decisions],
        commands: unit.commands,
      };
    }
    case "stop":
    case "drain":
      return {
        decisions: [
          handled(
            "nothing is sent to a session that is gone; the node's next registration is handled by adoption",
          ),
        ],
        commands: [],
      };
    default: {
      const never: never = u.kind;
      return never;
    }
  }
}

/** The replica still waiting for this start on this session, if any. */
function waitingStart(pass: Pass, u: UndeliverableState): DeepReadonly<ReplicaState> | undefined {
  const r = pass.work.replicas.replicas.get(u.replicaId);
  if (!r || r.phase === "draining") return undefined;
  const s = r.shards.find(
    (x) => x.shardId === u.shardId && x.nodeId === u.nodeId && x.sessionId === u.sessionId,
  );
  return s && s.desired === "running" && s.state === "pending" ? r : undefined;
}
