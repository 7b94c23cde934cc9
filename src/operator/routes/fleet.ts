/**
 * The fleet at any point of the log (for the UI's time slider), and the UI
 * page itself: one static HTML file and one script, no build step.
 */
import { readFileSync } from "node:fs";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { type FleetState, foldFleet } from "../../projections/index.js";
import type { ApiContext } from "../context.js";
import { nodeViews, replicaViews } from "../views.js";
import { parseWith, seqParam } from "./params.js";

const fleetQuery = z.strictObject({ at: seqParam.optional() });

function fleetBody(s: FleetState) {
  return {
    seq: s.seq,
    timeMs: s.timeMs,
    nodes: nodeViews(s),
    replicas: replicaViews(s),
    catalog: { seq: s.replicas.catalog.seq, models: s.replicas.catalog.models.map((m) => m.name) },
    lastPass: s.replicas.lastPass,
  };
}

export function fleetRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get("/v1/fleet", async (req) => {
    const q = parseWith(fleetQuery, req.query, "query");
    const current = ctx.runtime.state;
    if (q.at === undefined || q.at >= current.seq) return fleetBody(current);
    // Replay: a fresh fold from the start up to the sequence asked for.
    const records = [];
    for await (const r of ctx.log.read({ untilSeq: q.at })) records.push(r);
    return fleetBody(foldFleet(records));
  });

  const page = readFileSync(new URL("../ui/index.html", import.meta.url), "utf8");
  const script = readFileSync(new URL("../ui/ui.js", import.meta.url), "utf8");
  app.get("/", async (_req, reply) => reply.type("text/html; charset=utf-8").send(page));
  app.get("/index.html", async (_req, reply) => reply.type("text/html; charset=utf-8").send(page));
  app.get("/ui.js", async (_req, reply) => reply.type("text/javascript; charset=utf-8").send(script));
}
