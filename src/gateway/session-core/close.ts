import { Code } from "@connectrpc/connect";
import { SessionClosed_Reason } from "../../gen/llmgw/v1/events_pb.js";
import { sessionClosedId } from "./event-ids.js";
import type { EventDraft, SessionState } from "./types.js";

/**
 * Why a stream ends, as a typed value. `refused` is a stream that never
 * became a session (no session-closed event); every other kind closes an
 * open session. The SessionClosed reason and the Connect code of each are
 * decided in one place, `closeOutcome`.
 */
export type Close =
  /**
   * Refused before the session opened: the stream ends with `code`; with
   * `retryAfterMs` the agent is first told to reconnect after that long.
   */
  | { kind: "refused"; code: Code; detail: string; retryAfterMs?: number }
  /** The connection or the agent's side of the stream ended; the stream ends OK. */
  | { kind: "disconnected"; detail: string }
  /** No message within the heartbeat timeout. */
  | { kind: "silent"; detail: string }
  /** The agent sent something the gateway refuses (`code`: what it was). */
  | { kind: "protocol-error"; code: Code; detail: string }
  /** The send queue is full: the agent stopped reading. */
  | { kind: "slow-consumer"; detail: string }
  /** A newer session for the node opened. */
  | { kind: "superseded"; detail: string }
  /** The gateway drains: the agent was told to reconnect; the stream ends OK. */
  | { kind: "draining"; detail: string }
  /** The drain deadline passed: the stream ends now. */
  | { kind: "drain-deadline"; detail: string }
  /** The log cannot be reached (a publish failed, or the gateway lost it). */
  | { kind: "log-unavailable"; detail: string }
  /** The log refused one of the session's events for another reason. */
  | { kind: "log-failed"; detail: string }
  /** The reconciler expired the session (the gateway's lease lapsed). */
  | { kind: "expired"; detail: string }
  /** The agent's certificate (CN or serial) was revoked. */
  | { kind: "revoked"; detail: string }
  /** The session wrote events faster than its budget allows (a flooding agent). */
  | { kind: "event-budget"; detail: string }
  /** The session wrote more bytes than its byte budget allows (same reason in the log, EVENT_BUDGET). */
  | { kind: "byte-budget"; detail: string };

export type CloseKind = Close["kind"];

/** What a close means on the wire and in the log. */
export interface CloseOutcome {
  /** The session-closed event's reason; undefined for a refused stream (no event). */
  reason: SessionClosed_Reason | undefined;
  /** The stream ends with this Connect code; undefined: it ends OK after what is queued. */
  code: Code | undefined;
  /**
   * The stream ends at once, dropping what is queued for the agent: every
   * close with a code but those for what the agent sent. After a bad
   * message, what was queued before it (acks of stored events, a register
   * ack) is written first, so what the agent receives does not depend on how
   * soon its bad message followed a good one.
   */
  dropsQueued: boolean;
}

/** Closes for what the agent sent: what was queued before the bad message still reaches it. */
const WRITES_QUEUED: ReadonlySet<CloseKind> = new Set(["protocol-error", "event-budget", "byte-budget"]);

export function closeOutcome(c: Close): CloseOutcome {
  return { ...wireOutcome(c), dropsQueued: !WRITES_QUEUED.has(c.kind) };
}

function wireOutcome(c: Close): Omit<CloseOutcome, "dropsQueued"> {
  switch (c.kind) {
    case "refused":
      return { reason: undefined, code: c.code };
    case "disconnected":
      return { reason: SessionClosed_Reason.DISCONNECTED, code: undefined };
    case "silent":
      return { reason: SessionClosed_Reason.SILENT, code: Code.DeadlineExceeded };
    case "protocol-error":
      return { reason: SessionClosed_Reason.PROTOCOL_ERROR, code: c.code };
    case "slow-consumer":
      return { reason: SessionClosed_Reason.SLOW_CONSUMER, code: Code.ResourceExhausted };
    case "superseded":
      return { reason: SessionClosed_Reason.SUPERSEDED, code: Code.Aborted };
    case "draining":
      return { reason: SessionClosed_Reason.GATEWAY_DRAINING, code: undefined };
    case "drain-deadline":
      return { reason: SessionClosed_Reason.GATEWAY_DRAINING, code: Code.Unavailable };
    case "log-unavailable":
      return { reason: SessionClosed_Reason.LOG_UNAVAILABLE, code: Code.Unavailable };
    case "log-failed":
      return { reason: SessionClosed_Reason.PROTOCOL_ERROR, code: Code.Internal };
    case "expired":
      return { reason: SessionClosed_Reason.EXPIRED, code: Code.Unavailable };
    case "revoked":
      return { reason: SessionClosed_Reason.REVOKED, code: Code.PermissionDenied };
    case "event-budget":
    case "byte-budget":
      return { reason: SessionClosed_Reason.EVENT_BUDGET, code: Code.ResourceExhausted };
    default: {
      const never: never = c;
      throw new Error(`unknown close ${JSON.stringify(never)}`);
    }
  }
}

/**
 * Errors reading the request stream that are the agent's fault rather than
 * a dropped connection.
 */
export function isProtocolCode(code: Code): boolean {
  return [Code.ResourceExhausted, Code.InvalidArgument, Code.Internal, Code.Unimplemented].includes(code);
}

/** The session-closed event of an ended session, and how long the shell tries to append it. */
export interface ClosedEvent {
  readonly draft: EventDraft;
  readonly reason: SessionClosed_Reason;
  /** A log that could not be reached gets less of the ending stream's time. */
  readonly appendLimitMs: number;
}

/** The session-closed event of `state`'s session (a stream that ends without a close ended with its connection). */
export function closedEvent(state: SessionState): ClosedEvent {
  const c: Close = state.close ?? { kind: "disconnected", detail: "the connection ended" };
  const reason = closeOutcome(c).reason ?? SessionClosed_Reason.DISCONNECTED;
  const { nodeId, sessionId } = state;
  const gatewayId = state.config.gatewayId;
  return {
    draft: {
      id: sessionClosedId(sessionId),
      body: { case: "sessionClosed", value: { nodeId, sessionId, gatewayId, reason, detail: c.detail } },
      ackId: undefined,
    },
    reason,
    appendLimitMs: reason === SessionClosed_Reason.LOG_UNAVAILABLE ? 1_000 : 5_000,
  };
}
