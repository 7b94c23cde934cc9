import type { Event } from "../gen/llmgw/v1/events_pb.js";

/** One stored event: what the checker reads (a decoded log, in order). */
export interface CheckedEvent {
  seq: number;
  /** The stream's time for the message (ms since the epoch). */
  timeMs: number;
  event: Event;
}

/** The invariants (docs/ARCHITECTURE.md) the checker verifies, by name. */
export const RULES = [
  "slot-started-twice",
  "one-current-session",
  "fencing",
  "command-to-stale-session",
  "command-undeliverable",
  "failure-reason",
  "acked-lost",
  "stored-twice",
  "replay-determinism",
  "malformed-event",
  "subject-kind",
  "endpoint-not-ready",
  "placed-on-unavailable-gpu",
  "rollout-below-ready",
  "below-disruption-budget",
  "stale-leader-pass",
  "result-not-addressed",
  /** Only with `check-log --redecide`: decide, run again on the state a pass observed, decides otherwise. */
  "redecide",
] as const;
export type RuleName = (typeof RULES)[number];

/** One broken invariant: which rule, where in the log, and what broke. */
export interface Violation {
  rule: RuleName;
  /** The sequence where it shows (for a lost event: the sequence of its session's opening, 0 when unknown). */
  seq: number;
  message: string;
}

/**
 * A message an agent saw acknowledged: the gateway acks message `messageId`
 * (the session's message number, "1" for the registration) of session
 * `sessionId`; the log must hold it exactly once.
 */
export interface AckedMessage {
  nodeId: string;
  sessionId: string;
  messageId: string;
}
