/**
 * Commands a gateway could not deliver (CommandUndeliverable), as the
 * replicas fold keeps them: the command leaves the commands in flight (it
 * will never be answered) and waits in `undeliverable` for the reconciler's
 * next pass, whose UndeliverableHandled decision removes it. Pure.
 */
import {
  type CommandUndeliverable,
  CommandUndeliverable_Action,
  CommandUndeliverable_Reason,
} from "../gen/llmgw/v1/events_pb.js";
import type { EventMeta } from "./projection.js";
import type { CommandKind, ReplicasState, UndeliverableReason } from "./state.js";

export function foldUndeliverable(state: ReplicasState, v: CommandUndeliverable, meta: EventMeta): void {
  const kind = undeliveredKind(v.action);
  // A command without a known action was never one the reconciler issued.
  if (kind === undefined || v.commandId === "") return;
  const c = state.commands[v.commandId];
  if (c && c.sessionId === v.sessionId) delete state.commands[v.commandId];
  state.undeliverable[v.commandId] = {
    commandId: v.commandId,
    attempt: v.attempt,
    kind,
    nodeId: v.nodeId,
    sessionId: v.sessionId,
    gatewayId: v.gatewayId,
    shardId: v.shardId,
    replicaId: v.replicaId,
    reason: undeliverableReasonName(v.reason),
    detail: v.detail,
    seq: meta.seq,
  };
}

export function undeliveredKind(a: CommandUndeliverable_Action): CommandKind | undefined {
  switch (a) {
    case CommandUndeliverable_Action.START:
      return "start";
    case CommandUndeliverable_Action.STOP:
      return "stop";
    case CommandUndeliverable_Action.DRAIN:
      return "drain";
    case CommandUndeliverable_Action.UNSPECIFIED:
      return undefined;
    default:
      // An action added by a newer writer: nothing this fold can act on.
      return undefined;
  }
}

export function undeliverableReasonName(r: CommandUndeliverable_Reason): UndeliverableReason {
  switch (r) {
    case CommandUndeliverable_Reason.SESSION_CLOSED:
      return "session-closed";
    case CommandUndeliverable_Reason.SESSION_CLOSING:
      return "session-closing";
    case CommandUndeliverable_Reason.QUEUE_FULL:
      return "queue-full";
    case CommandUndeliverable_Reason.UNSPECIFIED:
      return "unspecified";
    default:
      return "unspecified";
  }
}
