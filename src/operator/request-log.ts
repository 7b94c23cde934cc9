/**
 * What the API's request log lines say about a request. Fastify's default
 * logs the whole URL, query string included, so a token pasted into a query
 * (`?token=…`, a habit from other tools) would land in every log line. A
 * value cannot be told from a token by its looks, so only the API's
 * sequence and count parameters are kept, and only when they are numbers;
 * every other value is replaced.
 */
import type { FastifyRequest } from "fastify";

/** The API's query parameters; any other name could itself be a pasted secret. */
const KNOWN_PARAMS = new Set(["after", "limit", "at", "subject", "model", "phase"]);
/** Those whose values are numbers (sequences, counts). */
const NUMERIC_PARAMS = new Set(["after", "limit", "at"]);

/**
 * The URL with its query reduced to what cannot be a secret: the numbers of
 * the numeric parameters, the names of the other known ones; everything
 * else becomes `[redacted]`.
 */
export function redactQuery(url: string): string {
  const q = url.indexOf("?");
  if (q < 0) return url;
  const params = url
    .slice(q + 1)
    .split("&")
    .map((pair) => {
      const eq = pair.indexOf("=");
      const key = eq < 0 ? pair : pair.slice(0, eq);
      if (!KNOWN_PARAMS.has(key)) return "[redacted]";
      const value = eq < 0 ? "" : pair.slice(eq + 1);
      return NUMERIC_PARAMS.has(key) && /^\d{0,20}$/.test(value) ? pair : `${key}=[redacted]`;
    });
  return `${url.slice(0, q)}?${params.join("&")}`;
}

/** The `req` serializer of the API's logger: fastify's fields, the query redacted. */
export function requestForLog(req: FastifyRequest) {
  return {
    method: req.method,
    url: redactQuery(req.url),
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort,
  };
}
