/**
 * Development mode (no token, loopback only) trusts whoever can reach the
 * port, and a browser on this machine can be made to reach it by any web
 * page: through DNS rebinding (a name the page controls resolves to
 * 127.0.0.1, so the request names that host) or by a cross-site form or
 * `fetch` that needs no preflight (no body, or a form/text body). This
 * guard closes both in development mode:
 *
 * - the `Host` must be a loopback name or address (localhost,
 *   127.0.0.0/8, [::1]), with or without a port;
 * - an `Origin`, when the browser sends one, must be the API's own
 *   (the scheme it serves and the `Host` of the request);
 * - a write (POST, PUT, PATCH, DELETE) must say its body is JSON (or YAML
 *   for the catalog), types a page can only send after a CORS preflight,
 *   which this API never grants.
 *
 * With tokens nothing changes: a page cannot make a browser send a bearer
 * token it does not have.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { isLoopbackHost } from "./auth.js";
import { ApiError } from "./errors.js";
import { YAML_TYPES } from "./routes/catalog.js";

/** Methods that change something; each needs a body type a page cannot send cross-site. */
const WRITE_METHODS = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/** Media types every write may use. */
const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json$/;
/** The catalog is also written as YAML (`llmgw catalog apply -f catalog.yaml`). */
const YAML_ROUTES = new Set(["/v1/catalog"]);

/** The host name of a `Host` header (`name[:port]` or `[v6]:port`), lower-case, brackets dropped; undefined if malformed. */
function hostNameOf(hostHeader: string): string | undefined {
  const m = /^(?:\[([0-9a-f:.]+)\]|([^:[\]]+))(?::(\d{1,5}))?$/i.exec(hostHeader.trim());
  const name = m?.[1] ?? m?.[2];
  return name?.toLowerCase();
}

/** True for a `Host` header that names this machine only: localhost, 127.0.0.0/8 or ::1, any port. */
export function isLoopbackHostHeader(hostHeader: string | undefined): boolean {
  if (hostHeader === undefined) return false;
  const name = hostNameOf(hostHeader);
  return name !== undefined && isLoopbackHost(name);
}

/** The media type of a Content-Type header, without parameters, lower-case. */
function mediaType(header: string | undefined): string | undefined {
  const t = header?.split(";")[0]?.trim().toLowerCase();
  return t === "" ? undefined : t;
}

function refused(message: string): ApiError {
  return new ApiError(403, "forbidden", message);
}

/**
 * The reason a development-mode request must be refused, or undefined when
 * it may go on. `scheme` is the one the API serves (http or https).
 */
export function siteCheck(
  req: Pick<FastifyRequest, "method" | "headers"> & { routeUrl: string | undefined },
  scheme: "http" | "https",
): ApiError | undefined {
  const host = req.headers.host;
  if (!isLoopbackHostHeader(host)) {
    return refused(
      `development mode (no token) answers only requests for a loopback host (localhost, 127.0.0.1, [::1]); this one is for ${JSON.stringify(host ?? "")}. Open the API as http://127.0.0.1:PORT, or run it with --token/--tokens to serve other names`,
    );
  }
  const origin = req.headers.origin;
  if (origin !== undefined) {
    const own = `${scheme}://${(host as string).toLowerCase()}`;
    if (origin.toLowerCase() !== own) {
      return refused(
        `development mode (no token) answers only pages it served itself: the Origin ${JSON.stringify(origin)} is not ${own}`,
      );
    }
  }
  if (WRITE_METHODS.has(req.method)) {
    const type = mediaType(req.headers["content-type"]);
    const allowed =
      type !== undefined &&
      (JSON_TYPE.test(type) ||
        (req.routeUrl !== undefined && YAML_ROUTES.has(req.routeUrl) && YAML_TYPES.includes(type)));
    if (!allowed) {
      return new ApiError(
        415,
        "unsupported-media-type",
        `${req.method} needs a JSON body with Content-Type: application/json${req.routeUrl !== undefined && YAML_ROUTES.has(req.routeUrl) ? " (or application/yaml)" : ""} in development mode (no token), even when empty (send {}); got ${type === undefined ? "no Content-Type" : JSON.stringify(type)}`,
      );
    }
  }
  return undefined;
}

/** Installs the guard: every request of a development-mode API passes it before anything else. */
export function installSiteGuard(app: FastifyInstance, scheme: "http" | "https"): void {
  app.addHook("onRequest", async (req) => {
    const e = siteCheck({ method: req.method, headers: req.headers, routeUrl: req.routeOptions.url }, scheme);
    if (e) throw e;
  });
}
