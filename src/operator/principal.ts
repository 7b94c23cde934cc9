/**
 * Who a request acts as, set by auth.ts once the request is authenticated
 * and read by the routes that write: the operator recorded in the log.
 * Its own module so routes need not import auth.ts (which imports the route table).
 */
import type { FastifyRequest } from "fastify";
import { ApiError } from "./errors.js";
import type { Principal } from "./tokens.js";

export const principals = new WeakMap<FastifyRequest, Principal>();

/** The authenticated principal of a request. */
export function principalOf(req: FastifyRequest): Principal {
  const p = principals.get(req);
  if (!p) throw new ApiError(401, "unauthorized", "the request was not authenticated");
  return p;
}
