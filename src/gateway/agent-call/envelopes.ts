import { Code, ConnectError } from "@connectrpc/connect";

/** Envelope flags (the first byte of an enveloped message). */
export const COMPRESSED_FLAG = 0b0000_0001;
export const END_STREAM_FLAG = 0b0000_0010;

const HEADER_BYTES = 5;

export interface Envelope {
  flags: number;
  data: Uint8Array;
}

/**
 * Splits a request body into enveloped messages (a flags byte, a 4-byte
 * big-endian length, the message), as Connect and gRPC frame them, while
 * the body's chunks arrive. A message whole inside one chunk is handed over
 * as a view of it; one split across chunks gets its buffer once its header
 * is in (its length known and checked) and each chunk's bytes are copied
 * into it once.
 *
 * Errors are Connect's own for the same input (codes and texts), so a call
 * ends the same way whichever path served it.
 */
export class EnvelopeReader {
  readonly #header = new Uint8Array(HEADER_BYTES);
  /** Header bytes of the envelope under way. */
  #headerLength = 0;
  /** The message under way, once its header is complete, and how much of it has arrived. */
  #message: Uint8Array | undefined;
  #filled = 0;

  constructor(readonly readMaxBytes: number) {}

  /** Bytes of an incomplete envelope held back. */
  get buffered(): number {
    return this.#headerLength + this.#filled;
  }

  /**
   * The whole envelopes completed by `chunk`, in order. Throws a
   * ResourceExhausted ConnectError as soon as a header in it announces a
   * message over `readMaxBytes` (before its bytes are held); none of the
   * chunk's envelopes are handed over then, as Connect's reader hands over
   * none of a chunk it fails on.
   */
  push(chunk: Uint8Array): Envelope[] {
    const out: Envelope[] = [];
    let at = 0;
    while (at < chunk.length) {
      if (this.#message === undefined) {
        // The common case: a whole envelope in what is left of the chunk, taken as a view.
        if (this.#headerLength === 0 && chunk.length - at >= HEADER_BYTES) {
          const len = this.#checked(readLength(chunk, at));
          if (chunk.length - at - HEADER_BYTES >= len) {
            out.push({ flags: chunk[at]!, data: chunk.subarray(at + HEADER_BYTES, at + HEADER_BYTES + len) });
            at += HEADER_BYTES + len;
            continue;
          }
        }
        const take = Math.min(HEADER_BYTES - this.#headerLength, chunk.length - at);
        this.#header.set(chunk.subarray(at, at + take), this.#headerLength);
        this.#headerLength += take;
        at += take;
        if (this.#headerLength < HEADER_BYTES) break;
        this.#message = new Uint8Array(this.#checked(readLength(this.#header, 0)));
        this.#filled = 0;
      }
      const message = this.#message;
      const take = Math.min(message.length - this.#filled, chunk.length - at);
      message.set(chunk.subarray(at, at + take), this.#filled);
      this.#filled += take;
      at += take;
      if (this.#filled < message.length) break;
      out.push({ flags: this.#header[0]!, data: message });
      this.#message = undefined;
      this.#headerLength = 0;
      this.#filled = 0;
    }
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
    const partial = (this.#headerLength > 0 && this.#message === undefined) || this.#filled > 0;
    this.#message = undefined;
    this.#headerLength = 0;
    this.#filled = 0;
    if (partial) throw new ConnectError("protocol error: incomplete envelope", Code.InvalidArgument);
  }

  #checked(len: number): number {
    if (len > this.readMaxBytes) {
      this.#message = undefined;
      this.#headerLength = 0;
      this.#filled = 0;
      throw new ConnectError(
        `message size ${len} is larger than configured readMaxBytes ${this.readMaxBytes}`,
        Code.ResourceExhausted,
      );
    }
    return len;
  }
}

function readLength(b: Uint8Array, at: number): number {
  return ((b[at + 1]! << 24) | (b[at + 2]! << 16) | (b[at + 3]! << 8) | b[at + 4]!) >>> 0;
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
