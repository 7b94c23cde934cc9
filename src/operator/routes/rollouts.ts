/**
 * Rollouts: each model's status; pause and resume (operator intent on the
 * rollouts subject); undo, which applies the catalog in force with the
 * model's previous spec from the log's catalog history (a CatalogChanged,
 * fenced on the catalog subject like any apply).
 */
import type { FastifyInstance } from "fastify";
import { isLogError } from "../../log/index.js";
import { readCatalogHistory } from "../catalog/history.js";
import { undoCatalog } from "../catalog/undo.js";
import { type ApiContext, appendAndWait } from "../context.js";
import { ApiError, notFound } from "../errors.js";
import { principalOf } from "../principal.js";
import { rolloutView, rolloutViews } from "../rollouts-view.js";
import { intentBody } from "./nodes.js";
import { modelParam, parseWith } from "./params.js";

function viewOf(ctx: ApiContext, model: string) {
  const s = ctx.runtime.state;
  const m = s.replicas.catalog.models.find((x) => x.name === model);
  if (!m) throw notFound(`model ${model} in the catalog`);
  return rolloutView(s, m);
}

export function rolloutRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get("/v1/rollouts", async () => {
    const s = ctx.runtime.state;
    return { seq: s.seq, rollouts: rolloutViews(s) };
  });

  app.get("/v1/rollouts/:model", async (req) => {
    const model = modelParam(req.params);
    return { seq: ctx.runtime.state.seq, rollout: viewOf(ctx, model) };
  });

  for (const action of ["pause", "resume"] as const) {
    app.post(`/v1/rollouts/:model/${action}`, async (req) => {
      const model = modelParam(req.params);
      const body = parseWith(intentBody, req.body, `${action} request`);
      viewOf(ctx, model);
      const operator = principalOf(req).name;
      const appended = await appendAndWait(
        ctx,
        action === "pause"
          ? { case: "rolloutPaused", value: { model, operator, reason: body.reason ?? "" } }
          : { case: "rolloutResumed", value: { model, operator } },
      );
      req.log.info({ model, action, seq: appended.seq, operator }, `rollout ${action} ${model}`);
      return { seq: appended.seq, rollout: viewOf(ctx, model) };
    });
  }

  app.post("/v1/rollouts/:model/undo", async (req) => {
    const model = modelParam(req.params);
    parseWith(intentBody, req.body, "undo request");
    viewOf(ctx, model);
    const history = await readCatalogHistory(ctx.log);
    const undo = undoCatalog(history, model);
    if (!undo.ok) throw new ApiError(409, "conflict", undo.message);
    const base = history.at(-1)?.seq ?? 0;
    const appliedBy = principalOf(req).name;
    let seq: number;
    try {
      ({ seq } = await appendAndWait(
        ctx,
        { case: "catalogChanged", value: { catalog: undo.catalog, appliedBy } },
        { expectLastSubjectSeq: base },
      ));
    } catch (err) {
      if (!isLogError(err, "wrong-last-sequence")) throw err;
      throw new ApiError(
        412,
        "precondition-failed",
        `the catalog changed while the undo was prepared (it was based on sequence ${base}); look at it and undo again`,
      );
    }
    req.log.info({ model, seq, fromSeq: undo.fromSeq, appliedBy }, `rollout undo ${model}`);
    return { seq, fromSeq: undo.fromSeq, revision: undo.revision, rollout: viewOf(ctx, model) };
  });
}
