/**
 * GET /v1/stream: server-sent events with the API's live position in the log
 * (`event: position`, `data: {seq, timeMs}`), sent at once and whenever the
 * projection folds more (at most every 200 ms). The UI's "live" mode follows
 * it. A comment line every 15 s keeps proxies from closing an idle stream.
 */
import type { FastifyInstance } from "fastify";
import type { ApiContext } from "../context.js";
import { EventStreams } from "./sse.js";

const THROTTLE_MS = 200;

export interface StreamControl {
  closeAll(): void;
}

export function streamRoutes(app: FastifyInstance, ctx: ApiContext): StreamControl {
  const streams = new EventStreams();
  app.get("/v1/stream", async (req, reply) => {
    let sent = -1;
    streams.serve(ctx, req, reply, {
      throttleMs: THROTTLE_MS,
      send(write) {
        const s = ctx.runtime.state;
        if (s.seq === sent) return;
        sent = s.seq;
        write("position", { seq: s.seq, timeMs: s.timeMs });
      },
    });
  });
  return streams;
}
