/** Liveness, readiness and Prometheus metrics. */
import type { FastifyInstance } from "fastify";
import { caughtUp } from "../../projections/runtime/index.js";
import type { ApiContext } from "../context.js";
import { ApiError } from "../errors.js";

const READY_WAIT_MS = 2000;

export function healthRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get("/healthz", async () => ({ status: "ok" }));

  // Ready means: connected to NATS and the projection has folded the log as it is now.
  app.get("/readyz", async () => {
    const r = await caughtUp({
      connected: ctx.natsConnected,
      projection: ctx.runtime,
      logEnd: () => ctx.log.lastSeq(),
      waitMs: READY_WAIT_MS,
    });
    if (!r.ready) throw new ApiError(503, "not-ready", r.reason);
    return { status: "ready", seq: r.detail.seq };
  });

  app.get("/metrics", async (_req, reply) => {
    reply.header("content-type", ctx.registry.contentType);
    return ctx.registry.metrics();
  });
}
