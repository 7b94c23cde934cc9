/**
 * The routing table as the log records it (the passes' EndpointsChanged):
 * GET /v1/endpoints[?model=] answers once; with `follow=true` it is a
 * server-sent event stream (`event: endpoints`) sent at once and after every
 * change, which is what a router without NATS access can follow. It equals
 * the llmgw_endpoints KV bucket the leader keeps.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { EndpointEntry, FleetState } from "../../projections/index.js";
import type { ApiContext } from "../context.js";
import { notFound } from "../errors.js";
import { parseWith } from "./params.js";
import { EventStreams } from "./sse.js";

const THROTTLE_MS = 100;

export const query = z.strictObject({
  model: z.string().min(1).max(64).optional(),
  follow: z.enum(["true", "false", "1", "0"]).optional(),
});

type Answer =
  | { seq: number; endpoints: Record<string, EndpointEntry[]> }
  | { seq: number; model: string; endpoints: EndpointEntry[] };

/**
 * The table, or one model's list; null for a model neither the catalog nor
 * the table knows. Models come in name order, as the bucket lists them: the
 * fold keeps them in the order they last appeared (a model whose last
 * replica stopped serving is dropped and comes back at the end).
 */
function answer(s: FleetState, model: string | undefined): Answer | null {
  const table = s.replicas.endpoints;
  if (model === undefined) {
    const endpoints: Record<string, EndpointEntry[]> = {};
    for (const m of Object.keys(table).sort()) endpoints[m] = table[m] as EndpointEntry[];
    return { seq: s.seq, endpoints };
  }
  const known = table[model] !== undefined || s.replicas.catalog.models.some((m) => m.name === model);
  return known ? { seq: s.seq, model, endpoints: table[model] ?? [] } : null;
}

export function endpointRoutes(app: FastifyInstance, ctx: ApiContext): EventStreams {
  const streams = new EventStreams();
  app.get("/v1/endpoints", async (req, reply) => {
    const q = parseWith(query, req.query, "query");
    const first = answer(ctx.runtime.state, q.model);
    if (!first) throw notFound(`model ${q.model}`);
    if (q.follow !== "true" && q.follow !== "1") return first;

    let sent = "";
    streams.serve(ctx, req, reply, {
      throttleMs: THROTTLE_MS,
      send(write) {
        // A model taken out of the catalog keeps its (empty) list on this stream.
        const s = ctx.runtime.state;
        const a = answer(s, q.model) ?? { seq: s.seq, model: q.model as string, endpoints: [] };
        const table = JSON.stringify(a.endpoints);
        if (table === sent) return;
        sent = table;
        write("endpoints", a);
      },
    });
  });
  return streams;
}
