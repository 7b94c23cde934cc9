/**
 * GET /v1/router/requests: requests per replica as the routers the API was
 * told about (`llmgw api --router-url`) count them, read from their metrics
 * at the time of the call. The UI polls it to show traffic spread, drain
 * and move.
 */
import type { FastifyInstance } from "fastify";
import { readRouter, sumReplicaRequests } from "../router-requests.js";

/** How long one router's metrics may take before it is reported unreadable. */
const READ_TIMEOUT_MS = 2_000;

export function routerRequestRoutes(app: FastifyInstance, routerUrls: readonly string[]): void {
  app.get("/v1/router/requests", async () => {
    const reads = await Promise.all(routerUrls.map((u) => readRouter(u, READ_TIMEOUT_MS)));
    return {
      routers: reads.map((r) => r.read),
      replicas: sumReplicaRequests(reads.map((r) => r.replicas)),
    };
  });
}
