import { type Close, closeOutcome } from "./close.js";
import { ack } from "./replies.js";
import type { Reply, SessionState, StepResult } from "./types.js";

/** One empty list for every step that has nothing of a kind: a step per message allocates none. */
export const NONE: readonly never[] = Object.freeze([]);

/** A step that changes nothing. */
export function nothing(state: SessionState): StepResult {
  return { state, events: NONE, replies: NONE, timers: NONE, notes: NONE };
}

/**
 * The session closes (once: a closing session ignores further closes).
 * `replies` go out before the stream ends; a close that ends the stream OK
 * also writes the ack still waiting for its flush, so what is stored is
 * acknowledged before the stream ends.
 */
export function closeNow(state: SessionState, close: Close, replies: readonly Reply[] = []): StepResult {
  if (state.close) return nothing(state);
  const out = [...replies];
  if (closeOutcome(close).code === undefined && state.ackThrough !== undefined) {
    out.push({ kind: "cumulative-ack", message: ack(state.ackThrough) });
  }
  return {
    state: { ...state, phase: "closing", close, ackThrough: undefined, ackHeld: 0, ackFlush: "none" },
    events: NONE,
    replies: out,
    close,
    timers: NONE,
    notes: NONE,
  };
}
