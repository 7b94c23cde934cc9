/**
 * The raw reference of the fan-in scenario, and the transport's own limit in
 * the ingest scenario: a bare Connect bidi server for AgentService.Connect on
 * the same HTTP/2 setup as the gateway (h2c or mTLS, @connectrpc/connect-node). It
 * acks what the gateway acks (registrations, shard statuses, command results),
 * as the gateway numbers and merges them, but stores nothing; it swallows
 * heartbeats, and pushes a message to every stream when told to over IPC.
 * Prints nothing; reports its port over IPC.
 */
import { readFileSync } from "node:fs";
import * as http2 from "node:http2";
import { create } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import {
  type AgentMessage,
  AgentService,
  type ControlMessage,
  ControlMessageSchema,
} from "../../src/gen/llmgw/v1/agent_pb.js";

class Pushes {
  readonly #items: ControlMessage[] = [];
  #wake: (() => void) | undefined;
  #ended = false;
  push(m: ControlMessage): void {
    this.#items.push(m);
    this.#wake?.();
  }
  /** Wakes a waiting `next` for good: the stream is over. */
  end(): void {
    this.#ended = true;
    this.#wake?.();
  }
  async next(): Promise<ControlMessage | undefined> {
    for (;;) {
      const m = this.#items.shift();
      if (m) return m;
      if (this.#ended) return undefined;
      // One waiter at a time; no listener per wait (they piled up on the signal).
      await new Promise<void>((r) => {
        this.#wake = r;
      });
      this.#wake = undefined;
    }
  }
}

const streams = new Set<Pushes>();

function ack(messageId: string): ControlMessage {
  return create(ControlMessageSchema, { msg: { case: "ack", value: { messageId, ok: true } } });
}

const routes = (router: ConnectRouter) =>
  router.service(AgentService, {
    async *connect(requests: AsyncIterable<AgentMessage>, ctx) {
      const out = new Pushes();
      streams.add(out);
      ctx.signal.addEventListener("abort", () => out.end(), { once: true });
      void (async () => {
        // Positions number every message of the stream, as the gateway's acks do.
        let position = 0;
        let cumulative = false;
        let through = 0;
        const flush = () => {
          out.push(ack(String(through)));
          through = 0;
        };
        try {
          for await (const m of requests) {
            position++;
            switch (m.msg.case) {
              case "register":
                cumulative = m.msg.value.cumulativeAcks;
                out.push(ack("register"));
                break;
              case "shard":
              case "result":
                if (!cumulative) out.push(ack(String(position)));
                else {
                  // Merged until the end of the turn, as the gateway merges them.
                  if (through === 0) setImmediate(flush);
                  through = position;
                }
                break;
              default:
                break;
            }
          }
        } catch {
          // the client went away
        }
        out.end();
      })();
      try {
        for (;;) {
          const m = await out.next();
          if (!m) return;
          yield m;
        }
      } finally {
        streams.delete(out);
      }
    },
  });

// Arguments: none (h2c), or the certificate, key and client CA files (mTLS, as the gateway serves).
const [certFile, keyFile, caFile] = process.argv.slice(2);
const settings = { maxConcurrentStreams: 100_000 };
const server =
  certFile && keyFile && caFile
    ? http2.createSecureServer(
        {
          settings,
          cert: readFileSync(certFile),
          key: readFileSync(keyFile),
          ca: readFileSync(caFile),
          requestCert: true,
          rejectUnauthorized: true,
        },
        connectNodeAdapter({ routes }),
      )
    : http2.createServer({ settings }, connectNodeAdapter({ routes }));
server.listen(0, "127.0.0.1", () => {
  const addr = server.address();
  process.send?.({ port: typeof addr === "object" && addr ? addr.port : 0 });
});

/** Pushes a message to `count` streams (all by default) from the `offset`-th on, ids `<broadcast>-<j>`. */
process.on("message", (m: { broadcast?: string; count?: number; offset?: number }) => {
  if (!m.broadcast) return;
  const targets = [...streams].slice(m.offset ?? 0);
  const count = Math.min(m.count ?? targets.length, targets.length);
  for (let j = 0; j < count; j++) {
    targets[j]?.push(
      create(ControlMessageSchema, {
        msg: { case: "drain", value: { commandId: `${m.broadcast}-${j}`, shardId: "s", deadlineUnixMs: 0n } },
      }),
    );
  }
});
process.on("SIGTERM", () => process.exit(0));
