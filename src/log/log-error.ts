// The log's error type, with no NATS in it: the log's pure files (decode-event.ts)
// raise it, and errors.ts (logErrorFrom) turns what the NATS client throws into it.

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
  /** The NATS credentials in use may not publish or subscribe to a subject (server permissions). */
  | "permission-denied"
  /** NATS refused the connection: no credentials, unknown ones, or expired ones. */
  | "unauthenticated"
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
}

/** True when `err` is a LogError with one of the given codes. */
export function isLogError(err: unknown, ...codes: LogErrorCode[]): err is LogError {
  return err instanceof LogError && (codes.length === 0 || codes.includes(err.code));
}
