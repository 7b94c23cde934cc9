/**
 * Authentication and roles, checked here for every route: the bearer token
 * names a principal (the token's name and role), the route's entry in
 * api-routes.ts names the role it needs. Tokens are compared in constant
 * time, as hashes (tokens.ts). Health probes and the static UI page are
 * open: probes carry no credentials, and the page holds no data —
 * everything it shows comes from authenticated calls.
 *
 * The operator the log records for a write is the principal's name, never
 * a value from the request: a request that names someone else (the
 * `X-Llmgw-Operator` header older clients sent, or an `operator` field in
 * the body) is refused, so a client learns at once that it cannot choose.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { API_ROUTES, type RouteAccess } from "./api-routes.js";
import { ApiError, invalid } from "./errors.js";
import { principals } from "./principal.js";
import { type Role, roleAllows } from "./roles.js";
import { isUiPath } from "./routes/ui.js";
import { type Principal, TokenTable, tokenSha256 } from "./tokens.js";

/**
 * `token`: one admin token (`--token`), recorded as ADMIN_TOKEN_NAME.
 * `tokens`: a table of named tokens with roles (`--tokens FILE`).
 * `dev`: no token, loopback only, every request acts as DEV_OPERATOR (admin).
 */
export type AuthMode =
  | { kind: "token"; token: string }
  | { kind: "tokens"; tokens: TokenTable }
  | { kind: "dev" };

/** The name `--token` is recorded as. */
export const ADMIN_TOKEN_NAME = "admin";
/** The operator dev mode records. */
export const DEV_OPERATOR: Principal = { name: "dev", role: "admin" };

/** The tokens file entry `--token` stands for. */
export function adminTokenEntry(token: string) {
  return { name: ADMIN_TOKEN_NAME, role: "admin" as const, sha256: tokenSha256(token) };
}

/** True for hosts that only this machine can reach. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h === "::1" || /^127\.\d+\.\d+\.\d+$/.test(h);
}

/** What each route needs, by `METHOD url` as fastify writes the url. */
const ACCESS = new Map<string, RouteAccess>(API_ROUTES.map((r) => [`${r.method} ${r.url}`, r.access]));

/**
 * The role a request needs. HEAD is a GET; a path no route matches needs
 * only a valid token (it gets a 404). A route missing from the table needs
 * admin — unreachable while openapi.test.ts holds, and safe if it does not.
 */
function accessOf(req: FastifyRequest): RouteAccess {
  const url = req.routeOptions.url;
  if (url === undefined) return "viewer";
  const method = req.method === "HEAD" ? "GET" : req.method;
  return ACCESS.get(`${method} ${url}`) ?? "admin";
}

function tableOf(mode: AuthMode): TokenTable | undefined {
  switch (mode.kind) {
    case "dev":
      return undefined;
    case "token":
      return new TokenTable([adminTokenEntry(mode.token)]);
    case "tokens":
      return mode.tokens;
  }
}

function bearer(req: FastifyRequest): string {
  const header = req.headers.authorization;
  if (!header) {
    throw new ApiError(
      401,
      "unauthorized",
      "missing Authorization header; send `Authorization: Bearer <token>`",
    );
  }
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!m?.[1]) throw new ApiError(401, "unauthorized", "the Authorization header must be `Bearer <token>`");
  return m[1];
}

function forbidden(req: FastifyRequest, need: Role, p: Principal): ApiError {
  const what = `${req.method} ${req.routeOptions.url ?? req.url.split("?")[0]}`;
  return new ApiError(
    403,
    "forbidden",
    `${what} needs the ${need} role; token ${JSON.stringify(p.name)} has ${p.role}`,
  );
}

/**
 * Refuses a request that tries to name its operator: an `X-Llmgw-Operator`
 * header other than the token's name (older clients sent the local user), or
 * an `operator` field in a JSON body (no body of the API has one).
 */
function refuseClaimedOperator(req: FastifyRequest, p: Principal): void {
  const recorded = `writes are recorded as the token's name, ${JSON.stringify(p.name)}`;
  const raw = req.headers["x-llmgw-operator"];
  const header = Array.isArray(raw) ? raw[0] : raw;
  if (header !== undefined && header.trim() !== p.name) {
    throw invalid(
      `the operator is not taken from the request: ${recorded}; the X-Llmgw-Operator header says ${shortQuote(header)} — remove it`,
    );
  }
  const body = req.body;
  if (body !== null && typeof body === "object" && !Array.isArray(body) && Object.hasOwn(body, "operator")) {
    const value = (body as { operator: unknown }).operator;
    throw invalid(
      `the operator is not taken from the request: ${recorded}; remove the body's operator field (it says ${shortQuote(value)})`,
    );
  }
}

/** A claimed value for a message: quoted and cut short, whatever it is. */
function shortQuote(value: unknown): string {
  if (typeof value !== "string") return `a ${value === null ? "null" : typeof value}`;
  return JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}…` : value);
}

export function installAuth(app: FastifyInstance, mode: AuthMode): void {
  const table = tableOf(mode);
  app.addHook("onRequest", async (req: FastifyRequest, reply: FastifyReply) => {
    const access = accessOf(req);
    if (access === "open" || isUiPath(req.url.split("?")[0] ?? "")) return;
    let principal: Principal;
    if (table) {
      const found = table.lookup(bearer(req));
      if (!found) throw new ApiError(401, "unauthorized", "invalid token");
      principal = found;
    } else {
      principal = DEV_OPERATOR;
    }
    principals.set(req, principal);
    // Every later line of this request (the handler's, "request completed") names the token; never the token itself.
    req.log = req.log.child({ tokenName: principal.name });
    reply.log = req.log;
    if (!roleAllows(principal.role, access)) throw forbidden(req, access, principal);
  });
  // After the body is parsed, before any handler writes.
  app.addHook("preHandler", async (req: FastifyRequest) => {
    const p = principals.get(req);
    if (p) refuseClaimedOperator(req, p);
  });
}
