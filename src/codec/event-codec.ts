import { type Event, EventSchema } from "../gen/llmgw/v1/events_pb.js";
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

/** Why bytes are not an event, in words that name where they were read (the sequence, when given). */
export class MalformedEvent {
  constructor(
    readonly message: string,
    readonly cause?: unknown,
  ) {}
}

/**
 * Decodes bytes from the log (what `fromBinary` returns; see
 * binary-decoder.ts for why not it), or says why they are not an event.
 * Unknown fields (written by a newer version) are kept, not rejected; an
 * event whose body is a kind this version does not know decodes with
 * `body.case === undefined` and callers skip it. Bytes that are not an
 * event, or an envelope without an id (which every writer sets), give a
 * MalformedEvent naming the sequence; the log raises it as a `malformed`
 * LogError (`decodeEvent`, src/log/decode-event.ts).
 */
export function decodeEventBytes(bytes: Uint8Array, seq?: number): Event | MalformedEvent {
  if (bytes.length === 0) return new MalformedEvent(`empty message${where(seq)}: not an llmgw event`);
  let event: Event;
  try {
    event = readEvent(bytes);
  } catch (err) {
    return new MalformedEvent(
      `undecodable message${where(seq)} (${bytes.length} bytes): ${(err as Error).message}`,
      err,
    );
  }
  if (event.id === "") {
    return new MalformedEvent(`message${where(seq)} decodes to an event without an id: not an llmgw event`);
  }
  return event;
}

/** Where a malformed message was read, in words: made on failure only (a replay decodes every event). */
function where(seq: number | undefined): string {
  return seq === undefined ? "" : ` at sequence ${seq}`;
}
