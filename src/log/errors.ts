import { JetStreamApiCodes, JetStreamApiError } from "@nats-io/jetstream";
import { JetStreamStatusError, jserrors } from "@nats-io/jetstream/internal";
import {
  AuthorizationError,
  ClosedConnectionError,
  ConnectionError,
  DrainingConnectionError,
  NoRespondersError,
  PermissionViolationError,
  RequestError,
  TimeoutError,
  UserAuthenticationExpiredError,
} from "@nats-io/transport-node";

import { LogError } from "./log-error.js";

export { isLogError, LogError, type LogErrorCode } from "./log-error.js";

/**
 * Turns anything thrown by the NATS client into a LogError. Used at every
 * boundary where a library call is made, so the rest of the code sees one
 * error type.
 */
export function logErrorFrom(err: unknown, context?: string): LogError {
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
  const denied = permissionViolation(err);
  if (denied) return permissionDenied(denied, prefix);
  if (err instanceof AuthorizationError || err instanceof UserAuthenticationExpiredError) {
    return new LogError("unauthenticated", `${prefix}NATS refused the credentials: ${message}`, {
      cause: err,
    });
  }
  if (isTransportFailure(err)) {
    return new LogError("unavailable", `${prefix}the log is unavailable: ${message}`, { cause: err });
  }
  // A batched direct get's "nothing there" is a status, not an API error.
  if (err instanceof JetStreamStatusError && err.code === 404) {
    return new LogError("not-found", `${prefix}${message}`, { cause: err });
  }
  return new LogError("internal", `${prefix}${message}`, { cause: err });
}

/**
 * The server's refusal of a publish or subscription, when that is what
 * `err` is or wraps: the client fails a request (a JetStream API call, a KV
 * write) whose subject was refused with it, sometimes as the cause of its own error.
 */
function permissionViolation(err: unknown): PermissionViolationError | undefined {
  let e: unknown = err;
  for (let depth = 0; depth < CAUSE_DEPTH && e instanceof Error; depth++, e = e.cause) {
    if (e instanceof PermissionViolationError) return e;
  }
  return undefined;
}

/** The LogError of a subject the server's permissions refused this connection. */
export function permissionDenied(err: PermissionViolationError, prefix = ""): LogError {
  return new LogError(
    "permission-denied",
    `${prefix}the NATS credentials in use may not ${err.operation === "publish" ? "publish to" : "subscribe to"} ${JSON.stringify(err.subject)} (server permissions)`,
    { cause: err },
  );
}

/** Socket errors (Node's `code`) that mean the server cannot be reached. */
const UNREACHABLE = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
]);
/** JetStream status codes of a request nobody could answer in time: no responders, timeout. */
const UNANSWERED_STATUS = new Set([503, 408]);
/** How far down a chain of causes to look (the client wraps a timeout in a request error). */
const CAUSE_DEPTH = 4;

/**
 * Whether the NATS client failed to get an answer at all, recognised by the
 * client's exported error classes and codes: timeouts, no responders,
 * closed, draining or broken connections, and "jetstream is not enabled",
 * which is how the client reports a publish that met no responders (a
 * restarted server whose JetStream is not up yet). For the caller they all
 * mean the same thing: the log did not take it, try again.
 */
function isTransportFailure(err: unknown): boolean {
  let e: unknown = err;
  for (let depth = 0; depth < CAUSE_DEPTH && e instanceof Error; depth++, e = e.cause) {
    if (
      e instanceof TimeoutError ||
      e instanceof NoRespondersError ||
      e instanceof ClosedConnectionError ||
      e instanceof DrainingConnectionError ||
      e instanceof ConnectionError ||
      e instanceof jserrors.JetStreamNotEnabled ||
      (e instanceof RequestError && e.isNoResponders()) ||
      (e instanceof JetStreamStatusError && UNANSWERED_STATUS.has(e.code))
    ) {
      return true;
    }
    const code = (e as NodeJS.ErrnoException).code;
    if (typeof code === "string" && UNREACHABLE.has(code)) return true;
  }
  return false;
}
