/**
 * An event from the log's bytes, or the log's `malformed` error. Pure: the
 * codec and the log's error type only.
 */
import { decodeEventBytes, MalformedEvent } from "../codec/index.js";
import type { Event } from "../gen/llmgw/v1/events_pb.js";
import { LogError } from "./log-error.js";

/**
 * Decodes bytes from the log (`decodeEventBytes`, src/codec). Bytes that are
 * not an event, or an envelope without an id, raise a `malformed` LogError
 * naming the sequence.
 */
export function decodeEvent(bytes: Uint8Array, seq?: number): Event {
  const decoded = decodeEventBytes(bytes, seq);
  if (decoded instanceof MalformedEvent) throw malformedError(decoded, seq);
  return decoded;
}

/** The `malformed` LogError of bytes that are not an event. */
export function malformedError(why: MalformedEvent, seq: number | undefined): LogError {
  return new LogError(
    "malformed",
    why.message,
    why.cause === undefined ? { seq } : { cause: why.cause, seq },
  );
}
