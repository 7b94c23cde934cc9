/**
 * The fleet at any point of the log (the UI's time slider): by sequence or
 * by time, folded by the API's FleetHistory from the nearest known state.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { FleetState } from "../../projections/index.js";
import type { ApiContext } from "../context.js";
import { invalid } from "../errors.js";
import { rolloutViews } from "../rollouts-view.js";
import { modelReadiness, nodeViews, replicaViews } from "../views.js";
import { parseWith, seqParam } from "./params.js";

export const fleetQuery = z.strictObject({
  at: seqParam.optional(),
  time: z
    .string()
    .refine((s) => !Number.isNaN(Date.parse(s)), "must be an ISO 8601 time, e.g. 2026-12-01T10:00:00Z")
    .optional(),
});

export function fleetBody(s: FleetState, lastSeq: number) {
  return {
    seq: s.seq,
    timeMs: s.timeMs,
    /** The log's last sequence when this was answered (the slider's end). */
    lastSeq,
    nodes: nodeViews(s),
    replicas: replicaViews(s),
    catalog: { seq: s.replicas.catalog.seq, models: s.replicas.catalog.models.map((m) => m.name) },
    readiness: modelReadiness(s),
    rollouts: rolloutViews(s),
    lastPass: s.replicas.lastPass,
  };
}

export function fleetRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get("/v1/fleet", async (req) => {
    const q = parseWith(fleetQuery, req.query, "query");
    if (q.at !== undefined && q.time !== undefined)
      throw invalid("give either at (a sequence) or time, not both");
    const current = ctx.runtime.state;
    const at = q.time !== undefined ? await ctx.history.seqAtTime(Date.parse(q.time)) : q.at;
    const lastSeq = Math.max(current.seq, at ?? 0);
    if (at === undefined || at >= current.seq) return fleetBody(current, current.seq);
    return fleetBody(await ctx.history.at(at), lastSeq);
  });
}
