import { z } from "zod";

const ms = (def: number) => z.number().int().positive().default(def);
const count = (def: number) => z.number().int().positive().default(def);

/**
 * Over this window a session's stream resets are counted (the rapid-reset
 * pattern: streams opened and reset at once, each costing the server work
 * and never counting against the concurrent-stream limit).
 */
export const RESET_WINDOW_MS = 10_000;

/** Caps on accepted TCP connections, before TLS or HTTP read a byte. */
export const ConnectionCapsSchema = z.object({
  /** Connections open at once; the next one is closed on accept. Keep it below the file-descriptor limit. */
  maxConnections: count(4096),
  /** Connections open at once from one source address. */
  maxConnectionsPerAddress: count(256),
});
export type ConnectionCaps = z.output<typeof ConnectionCapsSchema>;

/** What an HTTP/2 listener with client certificates allows a connection before and after it is useful. */
export const Http2LimitsSchema = ConnectionCapsSchema.extend({
  /** The TLS handshake must finish within this long. */
  handshakeTimeoutMs: ms(5_000),
  /** After TLS, the HTTP/2 preface and the first stream's headers must arrive within this long. */
  firstStreamTimeoutMs: ms(5_000),
  /** A session with no open stream is closed after this long (an agent's stream is long-lived, so only empty sessions count). */
  idleSessionTimeoutMs: ms(15_000),
  /**
   * A session whose peer has no verified client certificate carries one
   * stream, answered Unauthenticated, and is closed after it, or after this
   * long if that stream is not done by then.
   */
  unauthenticatedGraceMs: ms(2_000),
  /** HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS of every session. */
  maxConcurrentStreams: count(100),
  /** A session whose streams were reset more than this often within RESET_WINDOW_MS is destroyed. */
  maxStreamResets: count(100),
  /** Largest header list of a request, bytes (HTTP/2 SETTINGS_MAX_HEADER_LIST_SIZE). */
  maxHeaderBytes: count(16 * 1024),
});
export type Http2Limits = z.output<typeof Http2LimitsSchema>;
export type Http2LimitsInput = z.input<typeof Http2LimitsSchema>;

/** The same hygiene for an HTTP/1.1 listener (the operator API). */
export const Http1LimitsSchema = ConnectionCapsSchema.extend({
  /** A request's headers must arrive within this long of its start (a silent connection included). */
  headersTimeoutMs: ms(10_000),
  /** A whole request (headers and body) must arrive within this long; the response may take longer (live streams). */
  requestTimeoutMs: ms(30_000),
  /** An idle keep-alive connection is closed after this long. */
  keepAliveTimeoutMs: ms(5_000),
  /** Requests served on one connection before it is closed; 0 for no limit. */
  maxRequestsPerSocket: z.number().int().nonnegative().default(1_000),
  /** Largest request header block, bytes. */
  maxHeaderBytes: count(16 * 1024),
  /** Largest request body, bytes. */
  bodyLimitBytes: count(4 * 1024 * 1024),
}).refine((l) => l.headersTimeoutMs <= l.requestTimeoutMs, {
  path: ["headersTimeoutMs"],
  message: "the headers timeout must not be longer than the request timeout",
});
export type Http1Limits = z.output<typeof Http1LimitsSchema>;
export type Http1LimitsInput = z.input<typeof Http1LimitsSchema>;
