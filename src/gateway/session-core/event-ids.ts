/**
 * What names and shapes the events a session writes. The core makes event
 * drafts (an id and a body); the shell stamps the writer and the time when
 * it publishes them (`gateway/events.ts`), so the core reads no clock.
 */
import type { EventInit } from "../../codec/event-shape.js";

/** An event body as its init shape (plain objects for nested messages). */
export type BodyInit = NonNullable<EventInit["body"]>;

/** Message id of the n-th message of a session (1 = the registration). */
export function sessionEventId(sessionId: string, seq: number): string {
  return `${sessionId}-${seq}`;
}

/** Message id of a session's session-closed event. */
export function sessionClosedId(sessionId: string): string {
  return `${sessionId}-closed`;
}
