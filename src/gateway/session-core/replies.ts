import { create } from "@bufbuild/protobuf";
import { type ControlMessage, ControlMessageSchema } from "../../gen/llmgw/v1/agent_pb.js";

/** The registration's ack names the session, so the agent can tell which log events its acks stand for. */
export function ack(messageId: string, sessionId = ""): ControlMessage {
  return create(ControlMessageSchema, { msg: { case: "ack", value: { messageId, ok: true, sessionId } } });
}

/** A plain ack of an agent message (not the registration's, which names the session). */
export function isOkAck(m: ControlMessage): boolean {
  return m.msg.case === "ack" && m.msg.value.ok && m.msg.value.messageId !== "register";
}

export function reconnect(reason: string, retryAfterMs: number): ControlMessage {
  return create(ControlMessageSchema, { msg: { case: "reconnect", value: { reason, retryAfterMs } } });
}
