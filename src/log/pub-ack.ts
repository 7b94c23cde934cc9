/**
 * The JetStream publish ack as nats-server writes it on the common path,
 * `{"stream":"<name>", "seq":<n>}` with `,"duplicate": true` before the
 * brace for a retried message id, read straight from its bytes: one ack per
 * stored event, and decoding it to text and parsing JSON is a visible share
 * of the gateway's CPU per event under the ingest bench's load. Whitespace between the members is taken
 * wherever JSON allows it (the server writes a space after the first comma
 * and after the duplicate's colon). Anything else (a domain, an error, an
 * escaped or non-ASCII name) is not recognised here: the caller parses it as
 * JSON.
 */
import type { PubAck } from "@nats-io/jetstream";

const HEAD = ascii('{"stream":"');
const SEQ = ascii('"seq"');
const DUPLICATE = ascii('"duplicate"');
const TRUE = ascii("true");
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const CLOSE = 0x7d;

/**
 * The last stream name read, with its bytes: a gateway's acks all name the
 * same stream, so the name is compared rather than built again per ack.
 */
let lastName = { bytes: new Uint8Array(0), name: "" };

/** The ack in its common form, or undefined (parse it as JSON). */
export function parsePubAck(b: Uint8Array): PubAck | undefined {
  if (!startsWith(b, HEAD, 0)) return undefined;
  const start = HEAD.length;
  const end = b.indexOf(QUOTE, start);
  if (end <= start) return undefined;
  const stream = streamName(b, start, end);
  if (stream === undefined) return undefined;
  let i = member(b, end + 1, SEQ);
  if (i < 0) return undefined;
  let seq = 0;
  const digits = i;
  for (; i < b.length && b[i]! >= 0x30 && b[i]! <= 0x39; i++) seq = seq * 10 + (b[i]! - 0x30);
  if (i === digits || i - digits > 16 || !Number.isSafeInteger(seq)) return undefined;
  i = skipSpace(b, i);
  if (i === b.length - 1 && b[i] === CLOSE) return { stream, seq, duplicate: false };
  i = member(b, i, DUPLICATE);
  if (i < 0 || !startsWith(b, TRUE, i)) return undefined;
  i = skipSpace(b, i + TRUE.length);
  if (i === b.length - 1 && b[i] === CLOSE) return { stream, seq, duplicate: true };
  return undefined;
}

/** The position of the value after `,<ws>"key"<ws>:<ws>` at `at`, or -1. */
function member(b: Uint8Array, at: number, key: Uint8Array): number {
  if (b[at] !== COMMA) return -1;
  let i = skipSpace(b, at + 1);
  if (!startsWith(b, key, i)) return -1;
  i = skipSpace(b, i + key.length);
  if (b[i] !== COLON) return -1;
  return skipSpace(b, i + 1);
}

/** The name between `start` and `end` if it is plain ASCII without escapes (else undefined). */
function streamName(b: Uint8Array, start: number, end: number): string | undefined {
  const last = lastName.bytes;
  if (last.length === end - start) {
    let same = true;
    for (let j = 0; j < last.length; j++) {
      if (b[start + j] !== last[j]) {
        same = false;
        break;
      }
    }
    if (same) return lastName.name;
  }
  let name = "";
  for (let j = start; j < end; j++) {
    const c = b[j]!;
    if (c >= 0x80 || c === BACKSLASH) return undefined;
    name += String.fromCharCode(c);
  }
  lastName = { bytes: b.slice(start, end), name };
  return name;
}

/** JSON whitespace: space, tab, line feed, carriage return. */
function skipSpace(b: Uint8Array, at: number): number {
  let i = at;
  while (i < b.length && (b[i] === 0x20 || b[i] === 0x09 || b[i] === 0x0a || b[i] === 0x0d)) i++;
  return i;
}

function ascii(s: string): Uint8Array {
  return Uint8Array.from(s, (c) => c.charCodeAt(0));
}

function startsWith(b: Uint8Array, head: Uint8Array, at: number): boolean {
  if (b.length - at < head.length) return false;
  for (let j = 0; j < head.length; j++) if (b[at + j] !== head[j]) return false;
  return true;
}
