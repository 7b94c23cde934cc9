import { Code } from "@connectrpc/connect";
import { type Close, closeOutcome } from "./close.js";
import { ack, reconnect } from "./replies.js";
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
 * acknowledged before the stream ends. A stream that was not admitted yet
 * has no session to close: whatever ends it refuses it (no session-closed
 * event); once its session-opened event is on its way, the session closes
 * like an open one.
 */
export function closeNow(state: SessionState, why: Close, replies: readonly Reply[] = []): StepResult {
  if (state.close) return nothing(state);
  const close = state.phase === "registering" || state.phase === "admitting" ? asRefusal(why) : why;
  const out = [...replies];
  if (close.kind === "refused" && close.retryAfterMs !== undefined) {
    // The agent backs off for what it is told, not for its own schedule.
    out.push({ kind: "reconnect", message: reconnect(close.detail, close.retryAfterMs) });
  }
  if (closeOutcome(close).code === undefined && state.ackThrough !== undefined) {
    out.push({ kind: "cumulative-ack", message: ack(state.ackThrough) });
  }
  return {
    state: {
      ...state,
      phase: "closing",
      close,
      opening: undefined,
      ackThrough: undefined,
      ackHeld: 0,
      ackFlush: "none",
    },
    events: NONE,
    replies: out,
    close,
    timers: NONE,
    notes: NONE,
  };
}

/** A close of a stream that never became a session: a refusal with the close's code (Unavailable if it ends OK). */
function asRefusal(c: Close): Close {
  if (c.kind === "refused") return c;
  return { kind: "refused", code: closeOutcome(c).code ?? Code.Unavailable, detail: c.detail };
}
