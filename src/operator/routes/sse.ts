/**
 * Server-sent event streams of the API: a reply turned into a stream that
 * sends at once, again (throttled) whenever the projection folds more, and
 * a keepalive comment every 15 s so proxies do not close an idle stream.
 * The streams stay open until the client leaves or the server closes.
 */
import type { ServerResponse } from "node:http";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { ApiContext } from "../context.js";

const KEEPALIVE_MS = 15_000;

export interface EventStreamOptions {
  /** At most one `send` per this long after a change. */
  throttleMs: number;
  /** Writes what changed, if anything, with `write` (one `event:` with JSON `data:`). */
  send(write: (event: string, data: unknown) => void): void;
}

export class EventStreams {
  readonly #open = new Set<ServerResponse>();

  serve(ctx: ApiContext, req: FastifyRequest, reply: FastifyReply, opts: EventStreamOptions): void {
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
      "x-accel-buffering": "no",
    });
    this.#open.add(res);
    const write = (event: string, data: unknown) =>
      res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    let timer: NodeJS.Timeout | undefined;
    const send = () => {
      timer = undefined;
      if (!res.writableEnded) opts.send(write);
    };
    const unsubscribe = ctx.runtime.onChange(() => {
      timer ??= setTimeout(send, opts.throttleMs);
    });
    const keepalive = setInterval(() => res.write(": keepalive\n\n"), KEEPALIVE_MS);
    const done = () => {
      unsubscribe();
      clearInterval(keepalive);
      if (timer) clearTimeout(timer);
      this.#open.delete(res);
    };
    req.raw.on("close", done);
    res.on("close", done);
    send();
  }

  closeAll(): void {
    for (const res of this.#open) res.end();
    this.#open.clear();
  }
}
