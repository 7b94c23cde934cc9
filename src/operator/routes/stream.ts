/**
 * GET /v1/stream: server-sent events with the API's live position in the log
 * (`event: position`, `data: {seq, timeMs}`), sent at once and whenever the
 * projection folds more (at most every 200 ms). The UI's "live" mode follows
 * it. A comment line every 15 s keeps proxies from closing an idle stream.
 */
import type { ServerResponse } from "node:http";
import type { FastifyInstance } from "fastify";
import type { ApiContext } from "../context.js";

const THROTTLE_MS = 200;
const KEEPALIVE_MS = 15_000;

export interface StreamControl {
  closeAll(): void;
}

export function streamRoutes(app: FastifyInstance, ctx: ApiContext): StreamControl {
  const open = new Set<ServerResponse>();
  app.get("/v1/stream", async (req, reply) => {
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
      "x-accel-buffering": "no",
    });
    open.add(res);
    let sent = -1;
    let timer: NodeJS.Timeout | undefined;
    const send = () => {
      timer = undefined;
      const s = ctx.runtime.state;
      if (s.seq === sent || res.writableEnded) return;
      sent = s.seq;
      res.write(`event: position\ndata: ${JSON.stringify({ seq: s.seq, timeMs: s.timeMs })}\n\n`);
    };
    const unsubscribe = ctx.runtime.onChange(() => {
      timer ??= setTimeout(send, THROTTLE_MS);
    });
    const keepalive = setInterval(() => res.write(": keepalive\n\n"), KEEPALIVE_MS);
    const done = () => {
      unsubscribe();
      clearInterval(keepalive);
      if (timer) clearTimeout(timer);
      open.delete(res);
    };
    req.raw.on("close", done);
    res.on("close", done);
    send();
  });
  return {
    closeAll() {
      for (const res of open) res.end();
      open.clear();
    },
  };
}
