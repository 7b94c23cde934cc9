/**
 * One model of the catalog: PATCH /v1/models/:model changes its replica
 * count. It is a catalog change like PUT /v1/catalog: the catalog in force
 * with one number changed, fenced on the catalog subject (If-Match, or the
 * catalog this API has folded), applied by the token's name.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { catalogFileFrom, replicaCount, validateCatalog } from "../catalog/index.js";
import type { ApiContext } from "../context.js";
import { ApiError } from "../errors.js";
import { principalOf } from "../principal.js";
import { applyCatalog, etagOf, parseIfMatch } from "./catalog.js";
import { modelParam, parseWith } from "./params.js";

export const modelPatchBody = z.strictObject({ replicas: replicaCount });

export function modelRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.patch("/v1/models/:model", async (req, reply) => {
    const name = modelParam(req.params);
    const body = parseWith(modelPatchBody, req.body, "model change");
    const ifMatch = parseIfMatch(req.headers["if-match"]);
    // Change the catalog in force, not an older one this API has not folded yet.
    const last = await ctx.log.lastSubjectSeq(ctx.log.subjects.catalog);
    await ctx.runtime.waitFor(last, { timeoutMs: ctx.waitTimeoutMs });
    const catalog = ctx.runtime.state.replicas.catalog;
    const model = catalog.models.find((m) => m.name === name);
    if (!model) {
      throw new ApiError(404, "not-found", `model ${name} is not in the catalog (sequence ${catalog.seq})`);
    }
    const file = catalogFileFrom(catalog.models);
    for (const m of file.models) if (m.name === name) m.replicas = body.replicas;
    const result = validateCatalog(file);
    if (!result.ok) {
      // The catalog in force always validates; say so rather than write half a change.
      throw new ApiError(500, "internal", "the catalog in force does not validate", {
        issues: result.issues,
      });
    }
    const appliedBy = principalOf(req).name;
    const seq = await applyCatalog(ctx, result.catalog, ifMatch ?? catalog.seq, appliedBy);
    req.log.info({ seq, appliedBy, model: name, from: model.replicas, to: body.replicas }, "model scaled");
    reply.header("etag", etagOf(seq));
    return { seq, model: name, replicas: body.replicas, previous: model.replicas };
  });
}
