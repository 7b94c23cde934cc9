/**
 * What a JetStream message's reply subject says of it: its stream
 * sequence, its consumer's delivery sequence, the stream's time for it and
 * what is pending after it. Pure: a string in, numbers out.
 *
 * The server writes
 * `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<nanos>.<pending>`
 * (9 tokens) or, with a domain and account hash after `$JS.ACK`, 11 or
 * more tokens with the same fields from the 5th on. Read in place, in one
 * scan, with no token array or substring: a catch-up asks for every event,
 * and the library's delivery info splits the subject into tokens and an
 * object each time.
 */
export interface AckReply {
  streamSeq: number;
  consumerSeq: number;
  /** The stream's time in whole milliseconds: exactly the nanoseconds / 1e6, rounded down. */
  timeMs: number;
  pending: number;
}

/**
 * Where each dot of the last reply subject read is (the first 12): one
 * array for every call, as a call runs to its end before the next starts.
 */
const dots = new Int32Array(12);

/**
 * The dots of `reply` into `dots`; the number of tokens, or 0 when it is
 * not a `$JS.ACK` subject of 9 or at least 11 tokens.
 */
function scan(reply: string): number {
  if (!reply.startsWith("$JS.ACK.")) return 0;
  let n = 0;
  for (let i = reply.indexOf(".", 3); i !== -1; i = reply.indexOf(".", i + 1)) {
    if (n < 12) dots[n] = i;
    n++;
  }
  const tokens = n + 1;
  return tokens === 9 || tokens >= 11 ? tokens : 0;
}

/** Where the token before dot `next` ends: that dot, or the end of the subject when there is none. */
function tokenEnd(reply: string, tokens: number, next: number): number {
  return next < 12 && next < tokens - 1 ? (dots[next] as number) : reply.length;
}

/** The fields of a `$JS.ACK` reply subject, or undefined for anything else. */
export function ackReply(reply: string): AckReply | undefined {
  const tokens = scan(reply);
  if (tokens === 0) return undefined;
  // The dot before `delivered`: the 4th (9 tokens) or the 6th.
  const d = tokens === 9 ? 3 : 5;
  const streamSeq = digits(reply, (dots[d + 1] as number) + 1, dots[d + 2] as number);
  const consumerSeq = digits(reply, (dots[d + 2] as number) + 1, dots[d + 3] as number);
  const timeMs = millisOfNanos(reply, (dots[d + 3] as number) + 1, dots[d + 4] as number);
  const pending = digits(reply, (dots[d + 4] as number) + 1, tokenEnd(reply, tokens, d + 5));
  if (streamSeq === undefined || consumerSeq === undefined || timeMs === undefined || pending === undefined)
    return undefined;
  return { streamSeq, consumerSeq, timeMs, pending };
}

/** The decimal number in reply[from, to), or undefined when it is not one (or not exact in a double). */
function digits(reply: string, from: number, to: number): number | undefined {
  if (to <= from || to - from > 15) return undefined;
  let n = 0;
  for (let i = from; i < to; i++) {
    const d = reply.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return undefined;
    n = n * 10 + d;
  }
  return n;
}

/**
 * Whole milliseconds of the nanoseconds in reply[from, to): every digit but
 * the last six. Up to 15 of them are exact in a double as they are summed;
 * a longer number is left to Number.
 */
function millisOfNanos(reply: string, from: number, to: number): number | undefined {
  if (to <= from) return undefined;
  const msEnd = to - 6;
  let ms = 0;
  for (let i = from; i < to; i++) {
    const d = reply.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return undefined;
    if (i < msEnd) ms = ms * 10 + d;
  }
  if (msEnd - from > 15) return Number(reply.slice(from, msEnd));
  return ms;
}
