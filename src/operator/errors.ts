/**
 * Errors of the operator API. Every error leaves the server as
 * `{ "error": { "code", "message", ...details } }`; clients branch on
 * `code`, people read `message`.
 */
import type { FastifyError, FastifyInstance } from "fastify";
import { isLogError } from "../log/index.js";
import { isProjectionError } from "../projections/runtime/index.js";
import type { FieldIssue } from "./catalog/index.js";

export type ApiErrorCode =
  | "unauthorized"
  | "forbidden"
  | "invalid-argument"
  | "invalid-catalog"
  | "not-found"
  | "precondition-failed"
  | "conflict"
  | "unsupported-media-type"
  | "payload-too-large"
  | "log-unavailable"
  | "not-ready"
  | "timeout"
  | "gone"
  | "agent-unavailable"
  | "internal";

export interface ErrorBody {
  error: { code: ApiErrorCode; message: string; issues?: FieldIssue[]; seq?: number };
}

export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    readonly status: number,
    readonly code: ApiErrorCode,
    message: string,
    readonly extra: { issues?: FieldIssue[]; seq?: number } = {},
  ) {
    super(message);
  }

  body(): ErrorBody {
    return { error: { code: this.code, message: this.message, ...this.extra } };
  }
}

export const notFound = (what: string) => new ApiError(404, "not-found", `${what} not found`);
export const invalid = (message: string) => new ApiError(400, "invalid-argument", message);

/** Turns anything thrown in a handler into an ApiError. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (isLogError(err)) {
    switch (err.code) {
      case "wrong-last-sequence":
        return new ApiError(412, "precondition-failed", err.message);
      case "unavailable":
        return new ApiError(503, "log-unavailable", err.message);
      case "invalid-argument":
        return invalid(err.message);
      default:
        return new ApiError(500, "internal", err.message);
    }
  }
  if (isProjectionError(err)) {
    return err.code === "timeout"
      ? new ApiError(504, "timeout", err.message)
      : new ApiError(503, "not-ready", err.message);
  }
  const fe = err as Partial<FastifyError>;
  if (typeof fe.statusCode === "number" && fe.statusCode >= 400 && fe.statusCode < 500) {
    const code: ApiErrorCode =
      fe.statusCode === 415
        ? "unsupported-media-type"
        : fe.statusCode === 413
          ? "payload-too-large"
          : "invalid-argument";
    return new ApiError(fe.statusCode, code, fe.message ?? "bad request");
  }
  return new ApiError(500, "internal", err instanceof Error ? err.message : String(err));
}

/** Installs the JSON error and not-found handlers on the server. */
export function installErrorHandlers(app: FastifyInstance): void {
  app.setErrorHandler((err, req, reply) => {
    const e = toApiError(err);
    if (e.status >= 500) req.log.error({ err }, e.message);
    else req.log.info({ code: e.code }, e.message);
    if (e.status === 401) reply.header("www-authenticate", 'Bearer realm="llmgw"');
    return reply.status(e.status).send(e.body());
  });
  app.setNotFoundHandler((req, reply) => {
    const e = new ApiError(404, "not-found", `no such endpoint: ${req.method} ${req.url.split("?")[0]}`);
    return reply.status(404).send(e.body());
  });
}
