import { JetStreamApiCodes, JetStreamApiError } from "@nats-io/jetstream";

/**
 * What went wrong with the log, in the project's words. Callers branch on
 * the code, never on a library's error class or message.
 */
export type LogErrorCode =
  /** An `expect` constraint failed: someone else appended first (fencing). */
  | "wrong-last-sequence"
  /** The stream already holds a message with this id. */
  | "duplicate"
  /** The log cannot be reached or did not answer in time; retry later. */
  | "unavailable"
  /** The stream (or a message) does not exist. */
  | "not-found"
  /** Bytes in the log that are not a valid event. */
  | "malformed"
  /** The stream exists with a configuration llmgw cannot use. */
  | "incompatible-stream"
  /** A bad argument from the caller. */
  | "invalid-argument"
  | "internal";

/** The single error type of the log layer. The original error is kept as `cause`. */
export class LogError extends Error {
  override readonly name = "LogError";
  readonly code: LogErrorCode;
  /** The stream sequence the error is about, when there is one. */
  readonly seq: number | undefined;

  constructor(code: LogErrorCode, message: string, opts?: { cause?: unknown; seq?: number }) {
    super(message, opts?.cause === undefined ? undefined : { cause: opts.cause });
    this.code = code;
    this.seq = opts?.seq;
  }

  /**
   * Turns anything thrown by the NATS client into a LogError. Used at every
   * boundary where a library call is made, so the rest of the code sees one
   * error type.
   */
  static from(err: unknown, context?: string): LogError {
    if (err instanceof LogError) return err;
    const prefix = context ? `${context}: ` : "";
    if (err instanceof JetStreamApiError) {
      const code = err.code;
      if (
        code === JetStreamApiCodes.StreamWrongLastSequence ||
        code === JetStreamApiCodes.StreamWrongLastSequenceUnknown
      ) {
        return new LogError("wrong-last-sequence", `${prefix}${err.message}`, { cause: err });
      }
      if (code === JetStreamApiCodes.StreamNotFound || code === JetStreamApiCodes.NoMessageFound) {
        return new LogError("not-found", `${prefix}${err.message}`, { cause: err });
      }
      if (err.status === 503) {
        return new LogError("unavailable", `${prefix}${err.message}`, { cause: err });
      }
      return new LogError("internal", `${prefix}${err.message} (JetStream API error ${code})`, {
        cause: err,
      });
    }
    const message = err instanceof Error ? err.message : String(err);
    const name = err instanceof Error ? err.name : "";
    // The client reports transport problems with several error classes
    // (timeouts, no responders, closed or draining connections); for the
    // caller they all mean the same thing: the log did not take it, try again.
    // "jetstream is not enabled" is how the client reports a publish that met
    // no responders (a restarted server whose JetStream is not up yet).
    if (
      /timeout|no responders|jetstream is not enabled|503|closed|draining|disconnect|reconnect|connection|unavailable|ECONNREFUSED/i.test(
        `${name} ${message}`,
      )
    ) {
      return new LogError("unavailable", `${prefix}the log is unavailable: ${message}`, { cause: err });
    }
    return new LogError("internal", `${prefix}${message}`, { cause: err });
  }
}

/** True when `err` is a LogError with one of the given codes. */
export function isLogError(err: unknown, ...codes: LogErrorCode[]): err is LogError {
  return err instanceof LogError && (codes.length === 0 || codes.includes(err.code));
}
