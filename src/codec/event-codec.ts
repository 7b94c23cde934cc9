import { type Event, EventSchema } from "../gen/llmgw/v1/events_pb.js";
// The log's error type alone (pure), not the log's barrel, which reaches the NATS client.
import { LogError } from "../log/log-error.js";
import { compileDecoder } from "./binary-decoder.js";
import { compileEncoder } from "./binary-encoder.js";
import { installFastTextEncoding } from "./text-encoding.js";

// Every process that reads or writes the log encodes protobuf at volume.
installFastTextEncoding();

const writeEvent = compileEncoder(EventSchema);

/** The event's protobuf bytes (as `toBinary` writes them; see binary-encoder.ts for why not it). */
export function encodeEvent(event: Event): Uint8Array {
  return writeEvent(event);
}

const readEvent = compileDecoder(EventSchema);

/**
 * Decodes bytes from the log (what `fromBinary` returns; see
 * binary-decoder.ts for why not it). Unknown fields (written by a newer version)
 * are kept, not rejected; an event whose body is a kind this version does
 * not know decodes with `body.case === undefined` and callers skip it.
 * Bytes that are not an event, or an envelope without an id (which every
 * writer sets), raise a `malformed` LogError naming the sequence.
 */
export function decodeEvent(bytes: Uint8Array, seq?: number): Event {
  const where = seq === undefined ? "" : ` at sequence ${seq}`;
  if (bytes.length === 0) {
    throw new LogError("malformed", `empty message${where}: not an llmgw event`, { seq });
  }
  let event: Event;
  try {
    event = readEvent(bytes);
  } catch (err) {
    throw new LogError(
      "malformed",
      `undecodable message${where} (${bytes.length} bytes): ${(err as Error).message}`,
      { cause: err, seq },
    );
  }
  if (event.id === "") {
    throw new LogError("malformed", `message${where} decodes to an event without an id: not an llmgw event`, {
      seq,
    });
  }
  return event;
}
