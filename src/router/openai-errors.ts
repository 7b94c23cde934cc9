/** Errors in the OpenAI API's shape: `{"error": {message, type, param, code}}`. */
import type { ServerResponse } from "node:http";

export type ErrorType =
  | "invalid_request_error"
  | "authentication_error"
  | "permission_error"
  | "rate_limit_error"
  | "server_error"
  | "upstream_error";

export function sendError(
  res: ServerResponse,
  status: number,
  type: ErrorType,
  code: string,
  message: string,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({ error: { message, type, param: null, code } });
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    ...headers,
  });
  res.end(body);
}
