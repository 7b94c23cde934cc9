/**
 * `llmgw logs` through a gateway: the API asks over core NATS (never the
 * log: src/engine-logs) for a shard of a node whose stream this gateway
 * holds; the gateway asks the agent on that stream (EngineLogRequest) and
 * relays the agent's chunks to the API's reply subject. What an agent sends
 * is bounded here as well as by the agent (a forged agent is not bound by
 * its own limits): chunk size, bytes per second and bytes in all per
 * request, requests at once. A request whose client stops saying it is
 * still there (keep) ends, and is cancelled at the agent; so does every
 * request of a stream that ends.
 */
import { create } from "@bufbuild/protobuf";
import type { Msg, MsgHdrs, NatsConnection, Subscription } from "@nats-io/transport-node";
import { headers as natsHeaders } from "@nats-io/transport-node";
import type { Logger } from "pino";
import {
  type EngineLogSubjects,
  engineLogAskSchema,
  engineLogControlSchema,
  KEEP_EXPIRES_MS,
  type LogEnd,
  REPLY_KIND_HEADER,
  type ReplyKind,
} from "../../engine-logs/index.js";
import {
  ControlMessageSchema,
  type EngineLogChunk,
  EngineLogChunk_End,
} from "../../gen/llmgw/v1/agent_pb.js";
import type { GatewayMetrics } from "../metrics.js";
import type { SessionRegistry } from "../registry.js";
import type { AgentSession } from "../session.js";

export interface EngineLogBridgeLimits {
  /** The largest chunk taken from an agent. */
  chunkBytes: number;
  /** Bytes per second per request (over one-second windows). */
  rateBytesPerS: number;
  /** Bytes per request in all. */
  totalBytes: number;
  /** Requests at once per session, and on this gateway. */
  perSession: number;
  perGateway: number;
}

export const DEFAULT_BRIDGE_LIMITS: EngineLogBridgeLimits = {
  chunkBytes: 64 * 1024,
  rateBytesPerS: 2 * 1024 * 1024,
  totalBytes: 80 * 1024 * 1024,
  perSession: 8,
  perGateway: 256,
};

interface Pending {
  requestId: string;
  session: AgentSession;
  reply: string;
  lastKeepMs: number;
  bytes: number;
  windowStartMs: number;
  windowBytes: number;
}

const AGENT_END: Record<EngineLogChunk_End, LogEnd | undefined> = {
  [EngineLogChunk_End.UNSPECIFIED]: undefined,
  [EngineLogChunk_End.DONE]: "done",
  [EngineLogChunk_End.NOT_FOUND]: "not-found",
  [EngineLogChunk_End.LIMIT]: "limit",
  [EngineLogChunk_End.FAILED]: "failed",
  [EngineLogChunk_End.BUSY]: "busy",
};

/** An agent's error text is cut to this before it goes on. */
const MAX_ERROR_CHARS = 1000;

export class EngineLogBridge {
  readonly #pending = new Map<string, Pending>();
  readonly #subs: Subscription[] = [];
  readonly #limits: EngineLogBridgeLimits;
  #expiry: NodeJS.Timeout | undefined;

  constructor(
    private readonly o: {
      nc: NatsConnection;
      subjects: EngineLogSubjects;
      gatewayId: string;
      registry: SessionRegistry;
      metrics: GatewayMetrics;
      logger: Logger;
      limits?: Partial<EngineLogBridgeLimits>;
      /** How long a request lives without a keep from the API (default KEEP_EXPIRES_MS). */
      keepExpiresMs?: number;
    },
  ) {
    this.#limits = { ...DEFAULT_BRIDGE_LIMITS, ...o.limits };
  }

  /** Requests under way. */
  get size(): number {
    return this.#pending.size;
  }

  start(): void {
    const { nc, subjects, gatewayId } = this.o;
    this.#subs.push(
      nc.subscribe(subjects.ask(gatewayId), {
        callback: (err, m) => {
          if (!err) this.#onAsk(m);
        },
      }),
      nc.subscribe(subjects.control(gatewayId), {
        callback: (err, m) => {
          if (!err) this.#onControl(m);
        },
      }),
    );
    const expires = this.o.keepExpiresMs ?? KEEP_EXPIRES_MS;
    this.#expiry = setInterval(
      () => {
        const now = Date.now();
        for (const p of [...this.#pending.values()])
          if (now - p.lastKeepMs > expires) this.#finish(p, "expired", "", true);
      },
      Math.min(expires, 5_000),
    );
  }

  stop(): void {
    clearInterval(this.#expiry);
    for (const s of this.#subs.splice(0)) s.unsubscribe();
    for (const p of [...this.#pending.values()])
      this.#finish(p, "disconnected", `gateway ${this.o.gatewayId} is stopping`, true);
  }

  /** A chunk an agent sent on `session`. */
  onChunk(session: AgentSession, chunk: EngineLogChunk): void {
    const p = this.#pending.get(chunk.requestId);
    if (!p || p.session !== session) {
      this.o.metrics.engineLogDropped.inc({ reason: "stray" });
      return;
    }
    const l = this.#limits;
    const n = chunk.data.length;
    if (n > l.chunkBytes) {
      this.#finish(
        p,
        "limit",
        `the agent sent a chunk of ${n} bytes; at most ${l.chunkBytes} are taken`,
        true,
      );
      return;
    }
    const now = Date.now();
    if (now - p.windowStartMs >= 1000) {
      p.windowStartMs = now;
      p.windowBytes = 0;
    }
    p.windowBytes += n;
    p.bytes += n;
    if (p.windowBytes > l.rateBytesPerS || p.bytes > l.totalBytes) {
      const what =
        p.bytes > l.totalBytes ? `${l.totalBytes} bytes per request` : `${l.rateBytesPerS} bytes per second`;
      this.#finish(p, "limit", `the agent sent more than the gateway relays (${what})`, true);
      return;
    }
    if (n > 0) {
      this.o.metrics.engineLogBytes.inc(n);
      this.#publish(p.reply, "data", chunk.data);
    }
    const end = AGENT_END[chunk.end];
    if (end !== undefined) this.#finish(p, end, chunk.error.slice(0, MAX_ERROR_CHARS), false);
  }

  /** A session ended: its requests end too (the agent forgot them with its stream). */
  sessionEnded(session: AgentSession): void {
    for (const p of [...this.#pending.values()])
      if (p.session === session)
        this.#finish(p, "disconnected", `the agent of node ${session.nodeId} disconnected`, false);
  }

  #onAsk(m: Msg): void {
    let ask: ReturnType<typeof engineLogAskSchema.parse>;
    try {
      ask = engineLogAskSchema.parse(m.json());
    } catch {
      this.o.metrics.engineLogDropped.inc({ reason: "invalid" });
      return;
    }
    const reply = this.o.subjects.reply(ask.requestId);
    // Answers go to the request's own reply subject only, never anywhere the asker names.
    if (m.reply !== reply || this.#pending.has(ask.requestId)) {
      this.o.metrics.engineLogDropped.inc({ reason: "invalid" });
      return;
    }
    const refuse = (end: LogEnd, error: string) => {
      this.o.metrics.engineLogRequests.inc({ end });
      this.#publish(reply, "end", new TextEncoder().encode(JSON.stringify({ end, error })));
    };
    const session = this.o.registry.forNode(ask.nodeId).find((s) => !s.closing);
    if (!session) {
      refuse(
        "not-connected",
        `the agent of node ${ask.nodeId} is not connected to gateway ${this.o.gatewayId}`,
      );
      return;
    }
    const l = this.#limits;
    const ofSession = [...this.#pending.values()].filter((p) => p.session === session).length;
    if (ofSession >= l.perSession || this.#pending.size >= l.perGateway) {
      refuse(
        "busy",
        `gateway ${this.o.gatewayId} relays as many log requests as it takes at once; retry later`,
      );
      return;
    }
    const msg = create(ControlMessageSchema, {
      msg: {
        case: "engineLog",
        value: {
          requestId: ask.requestId,
          shardId: ask.shardId,
          tailLines: ask.tailLines,
          follow: ask.follow,
        },
      },
    });
    if (session.deliver(msg) !== "queued") {
      refuse("not-connected", `the stream of node ${ask.nodeId} is ending or not reading`);
      return;
    }
    const now = Date.now();
    this.#pending.set(ask.requestId, {
      requestId: ask.requestId,
      session,
      reply,
      lastKeepMs: now,
      bytes: 0,
      windowStartMs: now,
      windowBytes: 0,
    });
    this.#publish(reply, "accepted", new Uint8Array(0));
    this.o.logger.info(
      { node: ask.nodeId, shard: ask.shardId, request: ask.requestId, follow: ask.follow },
      "engine log requested",
    );
  }

  #onControl(m: Msg): void {
    let c: ReturnType<typeof engineLogControlSchema.parse>;
    try {
      c = engineLogControlSchema.parse(m.json());
    } catch {
      this.o.metrics.engineLogDropped.inc({ reason: "invalid" });
      return;
    }
    const p = this.#pending.get(c.requestId);
    if (!p) return;
    if (c.op === "keep") p.lastKeepMs = Date.now();
    else this.#finish(p, "cancelled", "", true);
  }

  /** Ends a request: its client is told (unless it left), and the agent too when it may still be sending. */
  #finish(p: Pending, end: LogEnd, error: string, cancelAtAgent: boolean): void {
    if (this.#pending.get(p.requestId) !== p) return;
    this.#pending.delete(p.requestId);
    this.o.metrics.engineLogRequests.inc({ end });
    if (cancelAtAgent && !p.session.closing)
      p.session.send(
        create(ControlMessageSchema, {
          msg: { case: "engineLog", value: { requestId: p.requestId, cancel: true } },
        }),
      );
    if (end !== "expired")
      this.#publish(p.reply, "end", new TextEncoder().encode(JSON.stringify({ end, error })));
  }

  #publish(subject: string, kind: ReplyKind, data: Uint8Array): void {
    const h: MsgHdrs = natsHeaders();
    h.set(REPLY_KIND_HEADER, kind);
    try {
      this.o.nc.publish(subject, data, { headers: h });
    } catch (err) {
      this.o.logger.warn({ err: String(err), subject }, "engine log reply not published");
    }
  }
}
