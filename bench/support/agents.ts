/**
 * Lightweight agents for the benchmarks: one gRPC bidi stream each (binary,
 * as the agent speaks it), nothing but what a scenario needs (register,
 * heartbeat, report, note when commands arrive). Over plaintext h2c
 * (gateways in --insecure-dev mode), many streams per HTTP/2 connection;
 * over mTLS, one connection and one client certificate per agent.
 *
 * They are written on Node's HTTP/2 client, not Connect's: they are the
 * transport's limit (ingest's agents, fan-in's bare reference), so nothing
 * of an agent's own work is in what they measure. Fan-in's gateway side
 * runs the real node agent instead (src/sim), whose Connect client's cost
 * is in its figures; the bytes on the wire are the same.
 */
import * as http2 from "node:http2";
import { create, fromBinary, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { EnvelopeReader, envelope } from "../../src/gateway/agent-call/index.js";
import {
  AgentMessageSchema,
  AgentService,
  type ControlMessage,
  ControlMessageSchema,
  type RegisterSchema,
} from "../../src/gen/llmgw/v1/agent_pb.js";
import { AckTracker, h100Hardware, registrationOf } from "../../src/sim/index.js";
import type { NodeCert } from "./node-certs.js";

const GIB = 1024;
const PATH = `/${AgentService.typeName}/${AgentService.method.connect.name}`;
/** Largest message an agent takes from the gateway. */
const READ_MAX_BYTES = 16 * 1024 * 1024;

export function registration(nodeId: string, cumulativeAcks = true): MessageInitShape<typeof RegisterSchema> {
  return registrationOf(nodeId, h100Hardware(nodeId, { memoryMb: 80 * GIB, pod: null }), {
    agentVersion: "bench",
    cumulativeAcks,
  });
}

/** What benchmark agents present over TLS: the CA that signed the gateway, and each node's certificate. */
export interface AgentTls {
  ca: Buffer;
  certs: ReadonlyMap<string, NodeCert>;
}

/**
 * The agents' HTTP/2 connections. Plaintext (h2c): shared by many agents,
 * `streamsPerConnection` streams on each. TLS: one connection per agent,
 * as a real agent has, since its certificate says which node it is.
 */
export class ConnectionPool {
  readonly #sessions: http2.ClientHttp2Session[] = [];
  #assigned = 0;

  constructor(
    readonly baseUrl: string,
    readonly streamsPerConnection: number,
    readonly tls?: AgentTls,
  ) {}

  next(nodeId: string): http2.ClientHttp2Session {
    if (this.tls) {
      const id = this.tls.certs.get(nodeId);
      if (!id) throw new Error(`no client certificate for ${nodeId}`);
      return this.#connect({ ca: this.tls.ca, cert: id.cert, key: id.key });
    }
    const i = Math.floor(this.#assigned++ / this.streamsPerConnection);
    while (this.#sessions.length <= i) this.#connect({});
    return this.#sessions[i]!;
  }

  #connect(tls: { ca?: Buffer; cert?: Buffer; key?: Buffer }): http2.ClientHttp2Session {
    const session = http2.connect(this.baseUrl, tls);
    // A connection that fails ends its streams; each agent reports that.
    session.on("error", () => {});
    this.#sessions.push(session);
    return session;
  }

  close(): void {
    for (const s of this.#sessions) s.destroy();
  }
}

export interface LightAgentOptions {
  onMessage?: (m: ControlMessage, agent: LightAgent) => void;
  /** Register with cumulative_acks (the default), or get one ack per message like an older agent. */
  cumulativeAcks?: boolean;
}

export class LightAgent {
  readonly #stream: http2.ClientHttp2Stream;
  #acks = 0;
  readonly #tracker: AckTracker;
  #ackWaiters: Array<{ resolve: () => void; reject: (e: unknown) => void }> = [];
  #end: unknown;
  readonly ended: Promise<unknown>;
  readonly registered: Promise<void>;
  sent = 0;
  /** Ack messages received after the registration's (fewer than `acks` when they are cumulative). */
  ackMessages = 0;

  constructor(
    session: http2.ClientHttp2Session,
    readonly nodeId: string,
    opts: LightAgentOptions = {},
  ) {
    const onMessage = opts.onMessage ?? (() => {});
    const tracker = new AckTracker(opts.cumulativeAcks ?? true);
    this.#tracker = tracker;
    let onRegistered!: () => void;
    let onFailed!: (e: unknown) => void;
    this.registered = new Promise((res, rej) => {
      onRegistered = res;
      onFailed = rej;
    });
    this.registered.catch(() => {});
    const stream = session.request({
      ":method": "POST",
      ":path": PATH,
      "content-type": "application/grpc+proto",
      te: "trailers",
    });
    this.#stream = stream;
    const reader = new EnvelopeReader(READ_MAX_BYTES);
    let status: { code: string; message: string } | undefined;
    const onHeaders = (h: http2.IncomingHttpHeaders) => {
      const code = h["grpc-status"];
      if (typeof code === "string") {
        status = { code, message: decodeURIComponent(String(h["grpc-message"] ?? "")) };
      }
    };
    stream.on("response", onHeaders);
    stream.on("trailers", onHeaders);
    stream.on("data", (chunk: Buffer) => {
      for (const { data } of reader.push(chunk)) {
        const m = fromBinary(ControlMessageSchema, data);
        if (m.msg.case === "ack") {
          if (m.msg.value.messageId === "register") onRegistered();
          else {
            this.ackMessages++;
            this.#acks += tracker.acked(m.msg.value.messageId).length;
            for (const w of this.#ackWaiters.splice(0)) w.resolve();
          }
        }
        onMessage(m, this);
      }
    });
    stream.on("error", () => {});
    this.ended = new Promise((resolve) => {
      stream.once("close", () => {
        this.#end = new Error(
          status === undefined
            ? `${nodeId}: the stream closed without a status (HTTP/2 code ${stream.rstCode})`
            : `${nodeId}: the stream ended: grpc-status ${status.code}${status.message ? ` ${status.message}` : ""}`,
        );
        onFailed(this.#end);
        for (const w of this.#ackWaiters.splice(0)) w.reject(this.#end);
        resolve(this.#end);
      });
    });
    this.send({ msg: { case: "register", value: registration(nodeId, opts.cumulativeAcks ?? true) } });
  }

  /** Messages after the registration acknowledged so far. */
  get acks(): number {
    return this.#acks;
  }

  /** Resolves at the next ack; rejects if the stream ended. */
  nextAck(): Promise<void> {
    if (this.#end !== undefined) return Promise.reject(this.#end);
    return new Promise((resolve, reject) => this.#ackWaiters.push({ resolve, reject }));
  }

  send(m: MessageInitShape<typeof AgentMessageSchema>): void {
    this.sent = this.#tracker.record(m.msg?.case);
    if (!this.#stream.writable) return;
    this.#stream.write(envelope(0, toBinary(AgentMessageSchema, create(AgentMessageSchema, m))));
  }

  heartbeat(): void {
    this.send({ msg: { case: "heartbeat", value: { gpuMemoryUsedMb: [0n, 0n, 0n, 0n, 0n, 0n, 0n, 0n] } } });
  }

  /** Ends the stream (the gateway records the session closed). */
  close(): void {
    if (this.#stream.writable) this.#stream.end();
  }

  abort(): void {
    if (!this.#stream.destroyed) this.#stream.close(http2.constants.NGHTTP2_CANCEL);
  }
}
