/** Nodes: list, one node, and operator intent (cordon, uncordon, drain). */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { type ApiContext, appendAndWait, operatorName } from "../context.js";
import { notFound } from "../errors.js";
import { nodeView, nodeViews } from "../views.js";
import { nodeIdParam, parseWith } from "./params.js";

export const intentBody = z.strictObject({
  reason: z.string().max(500, "must be at most 500 characters").optional(),
});

const ACTIONS = ["cordon", "uncordon", "drain"] as const;
type Action = (typeof ACTIONS)[number];

export function nodeRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get("/v1/nodes", async () => {
    const s = ctx.runtime.state;
    return { seq: s.seq, nodes: nodeViews(s) };
  });

  app.get("/v1/nodes/:id", async (req) => {
    const id = nodeIdParam(req.params);
    const node = nodeView(ctx.runtime.state, id);
    if (!node) throw notFound(`node ${id}`);
    return { seq: ctx.runtime.state.seq, node };
  });

  for (const action of ACTIONS) {
    app.post(`/v1/nodes/:id/${action}`, async (req) => {
      const id = nodeIdParam(req.params);
      const body = parseWith(intentBody, req.body, `${action} request`);
      // Intent for a node the fleet has never seen is a typo, not a plan.
      if (!ctx.runtime.state.inventory.nodes[id]) throw notFound(`node ${id}`);
      const operator = operatorName(req.headers);
      const reason = body.reason ?? "";
      const appended = await appendAndWait(ctx, intent(action, id, reason, operator));
      req.log.info({ node: id, action, seq: appended.seq, operator }, `${action} ${id}`);
      const s = ctx.runtime.state;
      return { seq: appended.seq, node: nodeView(s, id) };
    });
  }
}

function intent(action: Action, nodeId: string, reason: string, operator: string) {
  switch (action) {
    case "cordon":
      return { case: "nodeCordoned" as const, value: { nodeId, reason, operator } };
    case "uncordon":
      return { case: "nodeUncordoned" as const, value: { nodeId, operator } };
    case "drain":
      return { case: "nodeDrainRequested" as const, value: { nodeId, reason, operator } };
  }
}
