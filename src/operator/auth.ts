/**
 * Bearer-token authentication. The token is compared in constant time (as
 * hashes, so lengths do not leak either). Health probes and the static UI
 * page are open: probes carry no credentials, and the page holds no data —
 * everything it shows comes from authenticated calls.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { API_ROUTES } from "./api-routes.js";
import { ApiError } from "./errors.js";
import { isUiPath } from "./routes/ui.js";

/** The probes and the API's own description (api-routes.ts marks them `open`). */
const OPEN_PATHS = new Set(API_ROUTES.filter((r) => r.open).map((r) => r.url));

export type AuthMode = { kind: "token"; token: string } | { kind: "dev" };

/** True for hosts that only this machine can reach. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h === "::1" || /^127\.\d+\.\d+\.\d+$/.test(h);
}

function digest(s: string): Buffer {
  return createHash("sha256").update(s).digest();
}

export function installAuth(app: FastifyInstance, mode: AuthMode): void {
  if (mode.kind === "dev") return;
  const want = digest(mode.token);
  app.addHook("onRequest", async (req: FastifyRequest) => {
    const path = req.url.split("?")[0] ?? "";
    if (OPEN_PATHS.has(path) || isUiPath(path)) return;
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
    if (!timingSafeEqual(digest(m[1]), want)) throw new ApiError(401, "unauthorized", "invalid token");
  });
}
