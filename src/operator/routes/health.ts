/** Liveness, readiness and Prometheus metrics. */
import type { FastifyInstance } from "fastify";
import type { ApiContext } from "../context.js";
import { ApiError } from "../errors.js";

const READY_WAIT_MS = 2000;

export function healthRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get("/healthz", async () => ({ status: "ok" }));

  // Ready means: connected to NATS and the projection has folded the log as it is now.
  app.get("/readyz", async () => {
    if (!ctx.natsConnected()) throw new ApiError(503, "not-ready", "not connected to NATS");
    const rt = ctx.runtime;
    if (rt.status !== "running") {
      const why = rt.failure ? `: ${rt.failure.message}` : "";
      throw new ApiError(503, "not-ready", `the projection is ${rt.status}${why}`);
    }
    let last: number;
    try {
      last = await ctx.log.lastSeq();
    } catch (err) {
      throw new ApiError(503, "not-ready", `cannot read the log: ${(err as Error).message}`);
    }
    try {
      await rt.waitFor(last, { timeoutMs: READY_WAIT_MS });
    } catch {
      throw new ApiError(503, "not-ready", `the projection is at sequence ${rt.lastSeq}, the log at ${last}`);
    }
    return { status: "ready", seq: rt.lastSeq };
  });

  app.get("/metrics", async (_req, reply) => {
    reply.header("content-type", ctx.registry.contentType);
    return ctx.registry.metrics();
  });
}
