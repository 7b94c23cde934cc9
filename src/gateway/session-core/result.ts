import { type Close, closeOutcome } from "./close.js";
import { ack } from "./replies.js";
import type { Reply, SessionState, StepResult } from "./types.js";

/** A step that changes nothing. */
export function nothing(state: SessionState): StepResult {
  return { state, events: [], replies: [], timers: [], notes: [] };
}

/**
 * The session closes (once: a closing session ignores further closes).
 * `replies` go out before the stream ends; a close that ends the stream OK
 * also writes the ack still waiting for its flush, so what is stored is
 * acknowledged before the stream ends.
 */
export function closeNow(state: SessionState, close: Close, replies: Reply[] = []): StepResult {
  if (state.close) return nothing(state);
  const out = [...replies];
  if (closeOutcome(close).code === undefined && state.ackThrough !== undefined) {
    out.push({ kind: "cumulative-ack", message: ack(state.ackThrough) });
  }
  return {
    state: { ...state, phase: "closing", close, ackThrough: undefined, ackScheduled: false },
    events: [],
    replies: out,
    close,
    timers: [],
    notes: [],
  };
}
