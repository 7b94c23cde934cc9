import { Code, ConnectError } from "@connectrpc/connect";

/** Envelope flags (the first byte of an enveloped message). */
export const COMPRESSED_FLAG = 0b0000_0001;
export const END_STREAM_FLAG = 0b0000_0010;

const HEADER_BYTES = 5;

export interface Envelope {
  flags: number;
  data: Uint8Array;
}
const EMPTY = new Uint8Array(0);

/**
 * Splits a request body into enveloped messages (a flags byte, a 4-byte
 * big-endian length, the message), as Connect and gRPC frame them, while
 * the body's chunks arrive. A message is handed over as soon as its last
 * byte is in; bytes of a message still arriving are kept, nothing else.
 *
 * Errors are Connect's own for the same input (codes and texts), so a call
 * ends the same way whichever path served it.
 */
export class EnvelopeReader {
  #pending: Uint8Array = EMPTY;

  constructor(readonly readMaxBytes: number) {}

  /** Bytes of an incomplete envelope held back. */
  get buffered(): number {
    return this.#pending.length;
  }

  /**
   * The whole envelopes completed by `chunk`, in order. Throws a
   * ResourceExhausted ConnectError as soon as a header in it announces a
   * message over `readMaxBytes` (before its bytes are held); none of the
   * chunk's envelopes are handed over then, as Connect's reader hands over
   * none of a chunk it fails on.
   */
  push(chunk: Uint8Array): Envelope[] {
    const buf = this.#pending.length === 0 ? chunk : concat(this.#pending, chunk);
    const out: Envelope[] = [];
    let at = 0;
    while (buf.length - at >= HEADER_BYTES) {
      const len = ((buf[at + 1]! << 24) | (buf[at + 2]! << 16) | (buf[at + 3]! << 8) | buf[at + 4]!) >>> 0;
      if (len > this.readMaxBytes) {
        this.#pending = EMPTY;
        throw new ConnectError(
          `message size ${len} is larger than configured readMaxBytes ${this.readMaxBytes}`,
          Code.ResourceExhausted,
        );
      }
      if (buf.length - at - HEADER_BYTES < len) break;
      out.push({ flags: buf[at]!, data: buf.subarray(at + HEADER_BYTES, at + HEADER_BYTES + len) });
      at += HEADER_BYTES + len;
    }
    // What is kept is copied: a view would hold the whole chunk it came in.
    this.#pending = at === buf.length ? EMPTY : buf.slice(at);
    return out;
  }

  /**
   * The body ended: throws if it ended inside an envelope. As in Connect's
   * reader, a header whose message never started counts as no envelope
   * rather than a broken one (the header is taken before its message, and
   * only bytes not yet taken are an error); any byte past it, or a partial
   * header, is an error.
   */
  end(): void {
    const held = this.#pending.length;
    this.#pending = EMPTY;
    if (held > 0 && held !== HEADER_BYTES) {
      throw new ConnectError("protocol error: incomplete envelope", Code.InvalidArgument);
    }
  }
}

/** One enveloped message: `flags`, then `data`'s length (big-endian), then `data`. */
export function envelope(flags: number, data: Uint8Array): Uint8Array {
  const out = new Uint8Array(HEADER_BYTES + data.length);
  out[0] = flags;
  const len = data.length;
  out[1] = len >>> 24;
  out[2] = (len >>> 16) & 0xff;
  out[3] = (len >>> 8) & 0xff;
  out[4] = len & 0xff;
  out.set(data, HEADER_BYTES);
  return out;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}
