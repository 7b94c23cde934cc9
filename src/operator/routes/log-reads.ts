/**
 * What the log-reading commands (`llmgw replay`, `llmgw explain`) answer,
 * served by the API so an operator needs a token and no NATS credentials:
 * the folded fleet state at a sequence or a time, and the recorded
 * decisions that touched a replica or a node. `llmgw events` and
 * `llmgw check-log` page through GET /v1/events instead.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { invalidNodeIdReason } from "../../ids/index.js";
import { collectPasses } from "../../log/index.js";
import { type FleetState, filterFleet } from "../../projections/index.js";
import { touchingNode, touchingReplica } from "../../reconciler/index.js";
import type { ApiContext } from "../context.js";
import { invalid, notFound } from "../errors.js";
import { nodeIdParam, parseWith, replicaIdParam, seqParam } from "./params.js";

const timeParam = z
  .string()
  .refine((s) => !Number.isNaN(Date.parse(s)), "must be an ISO 8601 time, e.g. 2026-12-01T10:00:00Z");

export const replayQuery = z.strictObject({
  at: seqParam.optional(),
  time: timeParam.optional(),
  node: z
    .string()
    .superRefine((id, c) => {
      const why = invalidNodeIdReason(id, "");
      if (why) c.addIssue({ code: "custom", message: why.trimStart() });
    })
    .optional(),
  replica: z
    .string()
    .regex(/^[A-Za-z0-9._:-]{1,128}$/, "must be a replica id: letters, digits, '.', ':', '_', '-'")
    .optional(),
});

export const explainLogQuery = z.strictObject({
  at: seqParam.optional(),
  time: timeParam.optional(),
});

export function logReadRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get("/v1/replay", async (req) => {
    const q = parseWith(replayQuery, req.query, "query");
    if (q.at !== undefined && q.time !== undefined)
      throw invalid("give either at (a sequence) or time, not both");
    const lastSeq = await ctx.log.lastSeq();
    const at = q.time !== undefined ? await ctx.history.seqAtTime(Date.parse(q.time)) : q.at;
    const current = ctx.runtime.state;
    const state: FleetState =
      at === undefined || at >= current.seq ? current : await ctx.history.at(Math.min(at, lastSeq));
    if (q.node !== undefined && !state.inventory.nodes.get(q.node))
      throw notFound(`node ${q.node} in the log up to sequence ${state.seq}`);
    if (q.replica !== undefined && !state.replicas.replicas.get(q.replica))
      throw notFound(`replica ${q.replica} in the log up to sequence ${state.seq}`);
    const filtered = filterFleet(state, {
      ...(q.node === undefined ? {} : { nodeId: q.node }),
      ...(q.replica === undefined ? {} : { replicaId: q.replica }),
    });
    return {
      seq: state.seq,
      timeMs: state.timeMs,
      time: new Date(state.timeMs).toISOString(),
      lastSeq: Math.max(lastSeq, current.seq),
      state: filtered,
    };
  });

  const explain = (what: "replica" | "node") => async (req: { params: unknown; query: unknown }) => {
    const id = what === "node" ? nodeIdParam(req.params) : replicaIdParam(req.params);
    const q = parseWith(explainLogQuery, req.query, "query");
    if (q.at !== undefined && q.time !== undefined)
      throw invalid("give either at (a sequence) or time, not both");
    const passes = await collectPasses(ctx.log, {
      ...(q.at !== undefined ? { untilSeq: q.at } : {}),
      ...(q.time !== undefined ? { untilTimeMs: Date.parse(q.time) } : {}),
    });
    const decisions = what === "node" ? touchingNode(passes, id) : touchingReplica(passes, id);
    return { [what]: id, decisions };
  };
  app.get("/v1/explain/replica/:id", explain("replica"));
  app.get("/v1/explain/node/:id", explain("node"));
}
