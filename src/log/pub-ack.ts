/**
 * The JetStream publish ack as nats-server writes it on the common path,
 * `{"stream":"<name>","seq":<n>}` with `,"duplicate":true` for a retried
 * message id, read straight from its bytes: one ack per stored event, and
 * decoding it to text and parsing JSON was a visible share of the
 * gateway's CPU per event. Anything else (a domain, an error, other
 * spacing) is not recognised here: the caller parses it as JSON.
 */
import type { PubAck } from "@nats-io/jetstream";

const HEAD = ascii('{"stream":"');
const SEQ = ascii('","seq":');
const DUPLICATE = ascii(',"duplicate":true}');
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const CLOSE = 0x7d;

/** The ack in its common form, or undefined (parse it as JSON). */
export function parsePubAck(b: Uint8Array): PubAck | undefined {
  if (!startsWith(b, HEAD, 0)) return undefined;
  let i = HEAD.length;
  let stream = "";
  for (; i < b.length && b[i] !== QUOTE; i++) {
    const c = b[i]!;
    if (c >= 0x80 || c === BACKSLASH) return undefined;
    stream += String.fromCharCode(c);
  }
  if (stream === "" || !startsWith(b, SEQ, i)) return undefined;
  i += SEQ.length;
  let seq = 0;
  const digits = i;
  for (; i < b.length && b[i]! >= 0x30 && b[i]! <= 0x39; i++) seq = seq * 10 + (b[i]! - 0x30);
  if (i === digits || i - digits > 16 || !Number.isSafeInteger(seq)) return undefined;
  if (i === b.length - 1 && b[i] === CLOSE) return { stream, seq, duplicate: false };
  if (i + DUPLICATE.length === b.length && startsWith(b, DUPLICATE, i))
    return { stream, seq, duplicate: true };
  return undefined;
}

function ascii(s: string): Uint8Array {
  return Uint8Array.from(s, (c) => c.charCodeAt(0));
}

function startsWith(b: Uint8Array, head: Uint8Array, at: number): boolean {
  if (b.length - at < head.length) return false;
  for (let j = 0; j < head.length; j++) if (b[at + j] !== head[j]) return false;
  return true;
}
