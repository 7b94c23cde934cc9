import { create } from "@bufbuild/protobuf";
import { newEvent } from "../codec/event-shape.js";
import {
  type Command,
  CommandUndeliverable_Action,
  type CommandUndeliverable_Reason,
  type Event,
  type Writer,
  Writer_Kind,
  WriterSchema,
} from "../gen/llmgw/v1/events_pb.js";
import type { BodyInit } from "./session-core/index.js";

/** An event written by gateway `gatewayId`, stamped with its clock (`timeMs`: a simulated gateway's). */
export function gatewayEvent(gatewayId: string, id: string, body: BodyInit, timeMs = Date.now()): Event {
  return newEvent({ id, timeUnixMs: BigInt(timeMs), writer: writerOf(gatewayId), body });
}

/**
 * What a gateway process appends once it serves: where agents reach it, its
 * version, and its lease (the reconciler expires its sessions that long
 * after its lease key lapsed). One id per start, named by the gateway's
 * clock. `llmgw gateway` and the simulated gateway (src/simulation) both
 * write it through here.
 */
export function gatewayStartedEvent(
  gatewayId: string,
  start: { listenAddress: string; version: string; leaseTtlMs: number },
  timeMs = Date.now(),
): Event {
  return gatewayEvent(
    gatewayId,
    `gw-${gatewayId}-${timeMs}-started`,
    { case: "gatewayStarted", value: { gatewayId, ...start } },
    timeMs,
  );
}

/**
 * The writer of a gateway's events, made once per gateway: `create` keeps a
 * message it is given as it is, and a gateway writes one event per agent
 * message. Nothing changes an event once made.
 */
function writerOf(gatewayId: string): Writer {
  if (lastWriter?.id !== gatewayId) {
    lastWriter = create(WriterSchema, { kind: Writer_Kind.GATEWAY, id: gatewayId });
  }
  return lastWriter;
}

let lastWriter: Writer | undefined;

/**
 * A command this gateway could not deliver to a session it held. The id
 * names the command and its attempt, so a repeat of the same report is
 * stored once.
 */
export function commandUndeliverable(
  gatewayId: string,
  cmd: Command,
  passSeq: number,
  reason: CommandUndeliverable_Reason,
  detail: string,
  timeMs = Date.now(),
): Event {
  const a = cmd.action;
  return gatewayEvent(
    gatewayId,
    `${cmd.sessionId}-undeliverable-${cmd.commandId}-${cmd.attempt}`,
    {
      case: "commandUndeliverable",
      value: {
        commandId: cmd.commandId,
        attempt: cmd.attempt,
        nodeId: cmd.nodeId,
        sessionId: cmd.sessionId,
        gatewayId,
        reason,
        detail,
        action: a.case === undefined ? CommandUndeliverable_Action.UNSPECIFIED : ACTIONS[a.case],
        shardId: a.value?.shardId ?? "",
        replicaId: a.case === "start" ? a.value.replicaId : cmd.replicaId,
        passSeq: BigInt(passSeq),
      },
    },
    timeMs,
  );
}

const ACTIONS = {
  start: CommandUndeliverable_Action.START,
  stop: CommandUndeliverable_Action.STOP,
  drain: CommandUndeliverable_Action.DRAIN,
} as const satisfies Record<NonNullable<Command["action"]["case"]>, CommandUndeliverable_Action>;
