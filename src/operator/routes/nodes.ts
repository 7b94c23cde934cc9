/** Nodes: list, one node, and operator intent (cordon, uncordon, drain; per GPU: clear, cordon, uncordon). */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { type ApiContext, appendAndWait } from "../context.js";
import { notFound } from "../errors.js";
import { principalOf } from "../principal.js";
import { nodeView, nodeViews } from "../views.js";
import { gpuIndexParam, nodeIdParam, parseWith } from "./params.js";

export const intentBody = z.strictObject({
  reason: z.string().max(500, "must be at most 500 characters").optional(),
});

const ACTIONS = ["cordon", "uncordon", "drain"] as const;
type Action = (typeof ACTIONS)[number];

const GPU_ACTIONS = ["clear", "cordon", "uncordon"] as const;
type GpuAction = (typeof GPU_ACTIONS)[number];

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
      if (!ctx.runtime.state.inventory.nodes.get(id)) throw notFound(`node ${id}`);
      const operator = principalOf(req).name;
      const reason = body.reason ?? "";
      const appended = await appendAndWait(ctx, intent(action, id, reason, operator));
      req.log.info({ node: id, action, seq: appended.seq, operator }, `${action} ${id}`);
      const s = ctx.runtime.state;
      return { seq: appended.seq, node: nodeView(s, id) };
    });
  }

  for (const action of GPU_ACTIONS) {
    app.post(`/v1/nodes/:id/gpus/:index/${action}`, async (req) => {
      const id = nodeIdParam(req.params);
      const index = gpuIndexParam(req.params);
      const body = parseWith(intentBody, req.body, `GPU ${action} request`);
      const node = ctx.runtime.state.inventory.nodes.get(id);
      if (!node) throw notFound(`node ${id}`);
      if (!node.gpus.some((g) => g.index === index)) {
        const listed = node.gpus.map((g) => g.index).join(", ") || "none";
        throw notFound(`GPU ${index} of node ${id} (gpu index must be one the node registered: ${listed})`);
      }
      const operator = principalOf(req).name;
      const reason = body.reason ?? "";
      const appended = await appendAndWait(ctx, gpuIntent(action, id, index, reason, operator));
      req.log.info(
        { node: id, gpu: index, action, seq: appended.seq, operator },
        `GPU ${action} ${id}/${index}`,
      );
      return { seq: appended.seq, node: nodeView(ctx.runtime.state, id) };
    });
  }

  // Node-level problems (not tied to a GPU) are cleared as a whole.
  app.post("/v1/nodes/:id/problems/clear", async (req) => {
    const id = nodeIdParam(req.params);
    const body = parseWith(intentBody, req.body, "clear request");
    if (!ctx.runtime.state.inventory.nodes.get(id)) throw notFound(`node ${id}`);
    const operator = principalOf(req).name;
    const value = { nodeId: id, gpuIndex: 0, nodeLevel: true, reason: body.reason ?? "", operator };
    const appended = await appendAndWait(ctx, { case: "gpuProblemsCleared" as const, value });
    req.log.info({ node: id, seq: appended.seq, operator }, `node problems cleared ${id}`);
    return { seq: appended.seq, node: nodeView(ctx.runtime.state, id) };
  });
}

function gpuIntent(action: GpuAction, nodeId: string, gpuIndex: number, reason: string, operator: string) {
  switch (action) {
    case "clear":
      return {
        case: "gpuProblemsCleared" as const,
        value: { nodeId, gpuIndex, reason, operator, nodeLevel: false },
      };
    case "cordon":
      return { case: "gpuCordoned" as const, value: { nodeId, gpuIndex, reason, operator } };
    case "uncordon":
      return { case: "gpuUncordoned" as const, value: { nodeId, gpuIndex, operator } };
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
