import { ack } from "./replies.js";
import { NONE, nothing } from "./result.js";
import type { EventDraft, Note, SessionState, StepResult, TimerKind } from "./types.js";

const FLUSH_AT_TURN_END: readonly TimerKind[] = Object.freeze(["ack-flush"]);
const FLUSH_LATER: readonly TimerKind[] = Object.freeze(["ack-later"]);
const COALESCED: readonly Note[] = Object.freeze([{ kind: "ack-coalesced" }]);

/**
 * How many of `events` the agent is acked for once stored. Each is counted
 * as on its way (`state.onTheWay`) in the state of the step that drafts it
 * (the session-opened event's, `admitted`; a message's, as its budget is
 * paid), and counted off by its `stored` input, here.
 */
export function ackedIn(events: readonly EventDraft[]): number {
  let n = 0;
  for (let i = 0; i < events.length; i++) if (events[i]!.ackId !== undefined) n++;
  return n;
}

/**
 * The log stored message `messageId`: acknowledge it. Acks are decided here
 * alone: `state.onTheWay` says how many more events the agent is acked for
 * are still on their way to the log after this one.
 *
 * An agent that takes acks as cumulative gets one ack for a run of stored
 * messages. The log's acks arrive a few at a time, in many small reads, so
 * acking at the end of each event loop's turn wrote an ack for every three
 * messages under load. Instead, while more of the stream's messages are on
 * their way (their acks are coming), the ack waits: for a number of stored
 * messages (`config.ackEvery`), or `config.ackDelayMs` (the `ack-later`
 * timer), whichever comes first. Once nothing more is on
 * its way it is written at the end of the turn, so a stream that is not
 * busy is answered as fast as before. An ack still waiting in the send
 * queue is replaced rather than followed, too.
 */
export function stored(prev: SessionState, messageId: string): StepResult {
  const behind = prev.onTheWay - 1;
  if (!prev.cumulativeAcks) {
    return { ...nothing({ ...prev, onTheWay: behind }), replies: [{ kind: "ack", message: ack(messageId) }] };
  }
  const held = prev.ackHeld + 1;
  let flush = prev.ackFlush;
  let timers: readonly TimerKind[] = NONE;
  if (behind <= 0 || held >= prev.config.ackEvery) {
    if (flush !== "turn-end") {
      flush = "turn-end";
      timers = FLUSH_AT_TURN_END;
    }
  } else if (flush === "none") {
    flush = "later";
    timers = FLUSH_LATER;
  }
  return {
    state: { ...prev, onTheWay: behind, ackThrough: messageId, ackHeld: held, ackFlush: flush },
    events: NONE,
    replies: NONE,
    timers,
    notes: prev.ackThrough !== undefined ? COALESCED : NONE,
  };
}

/** An ack timer fired: write the cumulative ack waiting for it, if any. */
export function flushAck(state: SessionState): StepResult {
  const id = state.ackThrough;
  const next = { ...state, ackThrough: undefined, ackHeld: 0, ackFlush: "none" as const };
  if (id === undefined) return nothing(next);
  return { ...nothing(next), replies: [{ kind: "cumulative-ack", message: ack(id) }] };
}
