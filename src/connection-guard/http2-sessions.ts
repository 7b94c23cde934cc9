import {
  type Http2SecureServer,
  type Http2Server,
  constants as h2,
  type SecureServerOptions,
  type ServerHttp2Session,
  type ServerHttp2Stream,
  type ServerOptions,
} from "node:http2";
import type { TLSSocket } from "node:tls";
import type { Logger } from "pino";
import { type Http2Limits, RESET_WINDOW_MS } from "./limits.js";
import type { ConnectionMetrics, GuardReason } from "./metrics.js";

/** After GOAWAY, a session still open this long is destroyed. */
const GOAWAY_GRACE_MS = 1_000;
/** Malformed frames a session may send before Node destroys it. */
const MAX_INVALID_FRAMES = 100;
/** Streams a session may open over the concurrent-stream limit (refused by Node) before it is destroyed. */
const MAX_REJECTED_STREAMS = 20;

/** The HTTP/2 server options that carry the limits (SETTINGS, header sizes, frame abuse). */
export function http2ServerOptions(limits: Http2Limits): ServerOptions {
  return {
    settings: { maxConcurrentStreams: limits.maxConcurrentStreams, maxHeaderListSize: limits.maxHeaderBytes },
    maxSessionInvalidFrames: MAX_INVALID_FRAMES,
    maxSessionRejectedStreams: MAX_REJECTED_STREAMS,
    // A TLS client that did not negotiate h2 gets no longer than one that did.
    unknownProtocolTimeout: limits.firstStreamTimeoutMs,
  };
}

/** `http2ServerOptions` plus the TLS handshake deadline. */
export function http2SecureServerOptions(limits: Http2Limits): SecureServerOptions {
  return { ...http2ServerOptions(limits), handshakeTimeout: limits.handshakeTimeoutMs };
}

export interface SessionGuardOptions {
  limits: Http2Limits;
  /** TLS with client certificates: a session whose peer's certificate did not verify gets one stream. */
  clientCertificates: boolean;
  metrics: ConnectionMetrics;
  logger: Logger;
}

/**
 * Keeps a session open only while it is useful: the first stream must come
 * within a deadline, a session without streams is closed after the idle
 * timeout, a peer without a verified certificate gets its one answer
 * (Unauthenticated, from the stream handler) and then the session is
 * closed, and a session resetting streams at a rapid rate is destroyed.
 */
export function guardSessions(server: Http2Server | Http2SecureServer, opts: SessionGuardOptions): void {
  server.on("tlsClientError", (err: NodeJS.ErrnoException) => {
    if (err.code === "ERR_TLS_HANDSHAKE_TIMEOUT") opts.metrics.count("handshake_timeout");
  });
  server.on("session", (session: ServerHttp2Session) => watchSession(session, opts));
}

function watchSession(session: ServerHttp2Session, opts: SessionGuardOptions): void {
  const { limits, metrics, logger } = opts;
  // Held for the address: a destroyed session forgets its socket.
  const socket = session.socket;
  const verified = !opts.clientCertificates || (socket as Partial<TLSSocket>).authorized === true;
  const resets = new RateWindow(limits.maxStreamResets, RESET_WINDOW_MS);
  let streams = 0;
  let opened = 0;
  let timer: NodeJS.Timeout | undefined;
  let ended = false;

  const end = (reason: GuardReason, how: "goaway" | "destroy") => {
    clearTimeout(timer);
    if (ended || session.destroyed) return;
    ended = true;
    metrics.count(reason);
    logger.debug({ address: socket.remoteAddress, reason }, "HTTP/2 session closed by its limits");
    if (how === "destroy") {
      session.destroy();
      return;
    }
    session.close();
    setTimeout(() => session.destroy(), GOAWAY_GRACE_MS).unref();
  };
  const arm = (ms: number, reason: GuardReason) => {
    clearTimeout(timer);
    timer = setTimeout(() => end(reason, "destroy"), ms);
    timer.unref();
  };

  if (verified) arm(limits.firstStreamTimeoutMs, "first_stream_deadline");
  else arm(Math.min(limits.unauthenticatedGraceMs, limits.firstStreamTimeoutMs), "unauthenticated");
  session.once("close", () => clearTimeout(timer));

  session.on("stream", (stream: ServerHttp2Stream) => {
    opened++;
    if (!verified && opened > 1) {
      // The first stream carries the Unauthenticated answer; nothing else is served.
      stream.close(h2.NGHTTP2_REFUSED_STREAM);
      return;
    }
    streams++;
    if (verified) clearTimeout(timer);
    stream.once("close", () => {
      streams--;
      if (stream.rstCode !== h2.NGHTTP2_NO_ERROR && resets.exceeded(Date.now())) {
        logger.warn(
          { address: socket.remoteAddress, limit: limits.maxStreamResets, windowMs: RESET_WINDOW_MS },
          "HTTP/2 session destroyed: too many stream resets (rapid reset)",
        );
        end("stream_resets", "destroy");
      } else if (!verified) end("unauthenticated", "goaway");
      else if (streams === 0 && !ended) arm(limits.idleSessionTimeoutMs, "idle");
    });
  });
}

/** Counts events in a sliding window; `exceeded` records one and says whether there are now more than `max`. */
class RateWindow {
  readonly #times: number[] = [];

  constructor(
    private readonly max: number,
    private readonly windowMs: number,
  ) {}

  exceeded(now: number): boolean {
    this.#times.push(now);
    while (this.#times.length > 0 && (this.#times[0] ?? now) <= now - this.windowMs) this.#times.shift();
    return this.#times.length > this.max;
  }
}
