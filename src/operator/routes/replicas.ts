/** Replicas: list, one replica, and the decisions that explain it. */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { ApiContext } from "../context.js";
import { notFound } from "../errors.js";
import { explainReplica, replicaHistory } from "../explain.js";
import { modelReadiness, replicaView, replicaViews } from "../views.js";
import { parseWith, replicaIdParam, seqParam } from "./params.js";

export const listQuery = z.strictObject({
  model: z.string().max(64).optional(),
  phase: z.enum(["pending", "placed", "running", "draining"]).optional(),
});

export function replicaRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get("/v1/replicas", async (req) => {
    const q = parseWith(listQuery, req.query, "query");
    const s = ctx.runtime.state;
    const replicas = replicaViews(s).filter(
      (r) => (q.model === undefined || r.model === q.model) && (q.phase === undefined || r.phase === q.phase),
    );
    const models = modelReadiness(s).filter((m) => q.model === undefined || m.model === q.model);
    return { seq: s.seq, models, replicas };
  });

  app.get("/v1/replicas/:id", async (req) => {
    const id = replicaIdParam(req.params);
    const r = ctx.runtime.state.replicas.replicas.get(id);
    if (!r) throw notFound(`replica ${id}`);
    return { seq: ctx.runtime.state.seq, replica: replicaView(r) };
  });

  app.get("/v1/replicas/:id/explain", async (req) => {
    const id = replicaIdParam(req.params);
    const q = parseWith(atQuery, req.query, "query");
    const { state: s, lastSeq } = await stateAt(ctx, q.at);
    const r = s.replicas.replicas.get(id);
    // A live replica's story starts with its creation; a removed one is searched in the whole log.
    const { decisions, decision } = await explainReplica(ctx.log, id, {
      fromSeq: r ? r.createdSeq : 1,
      untilSeq: s.seq,
    });
    if (!r && decisions.length === 0) throw notFound(`replica ${id}`);
    return {
      seq: s.seq,
      lastSeq,
      replicaId: id,
      replica: r ? replicaView(r) : null,
      decisions,
      // Where it is and why (chosen + runners-up), or why it waits (nodes ruled out per reason).
      placement: decision.placed,
      pending: r?.phase === "pending" ? decision.pending : null,
    };
  });

  app.get("/v1/replicas/:id/history", async (req) => {
    const id = replicaIdParam(req.params);
    const q = parseWith(atQuery, req.query, "query");
    const { state: s } = await stateAt(ctx, q.at);
    const r = s.replicas.replicas.get(id);
    const history = await replicaHistory(ctx.log, id, { fromSeq: r ? r.createdSeq : 1, untilSeq: s.seq });
    if (!r && history.length === 0) throw notFound(`replica ${id}`);
    return { seq: s.seq, replicaId: id, history };
  });
}

export const atQuery = z.strictObject({ at: seqParam.optional() });

/** The fleet now, or at an earlier sequence (the UI's slider position). */
async function stateAt(ctx: ApiContext, at: number | undefined) {
  const current = ctx.runtime.state;
  if (at === undefined || at >= current.seq) return { state: current, lastSeq: current.seq };
  return { state: await ctx.history.at(at), lastSeq: current.seq };
}
