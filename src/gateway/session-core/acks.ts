import { ack } from "./replies.js";
import { nothing } from "./result.js";
import type { Note, SessionState, StepResult } from "./types.js";

/**
 * The log stored message `messageId`: acknowledge it. For an agent that
 * takes acks as cumulative, the ack waits for the ack-flush timer (the end
 * of the event loop's turn): the log's acks arrive in batches, and every
 * message stored in the same turn is then answered by one write. An ack
 * still waiting in the send queue is replaced rather than followed, too.
 */
export function stored(state: SessionState, messageId: string): StepResult {
  if (!state.cumulativeAcks) {
    return { ...nothing(state), replies: [{ kind: "ack", message: ack(messageId) }] };
  }
  const notes: Note[] = state.ackThrough !== undefined ? [{ kind: "ack-coalesced" }] : [];
  return {
    ...nothing({ ...state, ackThrough: messageId, ackScheduled: true }),
    timers: state.ackScheduled ? [] : ["ack-flush"],
    notes,
  };
}

/** The ack-flush timer fired: write the cumulative ack waiting for it, if any. */
export function flushAck(state: SessionState): StepResult {
  const id = state.ackThrough;
  const next = { ...state, ackThrough: undefined, ackScheduled: false };
  if (id === undefined) return nothing(next);
  return { ...nothing(next), replies: [{ kind: "cumulative-ack", message: ack(id) }] };
}
