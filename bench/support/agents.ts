/**
 * Lightweight agents for the benchmarks: one Connect bidi stream each,
 * nothing but what a scenario needs (register, heartbeat, report, note
 * when commands arrive). Over plaintext h2c (gateways in --insecure-dev
 * mode), many streams per HTTP/2 connection; over mTLS, one connection and
 * one client certificate per agent.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { type Client, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { PushQueue } from "../../src/async/push-queue.js";
import {
  type AgentMessage,
  AgentMessageSchema,
  AgentService,
  type ControlMessage,
  type RegisterSchema,
} from "../../src/gen/llmgw/v1/agent_pb.js";
import { AckTracker, h100Hardware, registrationOf } from "../../src/sim/index.js";
import type { NodeCert } from "./node-certs.js";

const GIB = 1024;

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
  readonly #clients: Array<Client<typeof AgentService>> = [];
  readonly #managers: Http2SessionManager[] = [];
  #assigned = 0;

  constructor(
    readonly baseUrl: string,
    readonly streamsPerConnection: number,
    readonly tls?: AgentTls,
  ) {}

  next(nodeId: string): Client<typeof AgentService> {
    if (this.tls) {
      const id = this.tls.certs.get(nodeId);
      if (!id) throw new Error(`no client certificate for ${nodeId}`);
      return this.#connect({ ca: this.tls.ca, cert: id.cert, key: id.key });
    }
    const i = Math.floor(this.#assigned++ / this.streamsPerConnection);
    while (this.#clients.length <= i) this.#connect({});
    return this.#clients[i]!;
  }

  #connect(tls: { ca?: Buffer; cert?: Buffer; key?: Buffer }): Client<typeof AgentService> {
    const sessionManager = new Http2SessionManager(this.baseUrl, { idleConnectionTimeoutMs: 600_000 }, tls);
    this.#managers.push(sessionManager);
    const client = createClient(AgentService, createGrpcTransport({ baseUrl: this.baseUrl, sessionManager }));
    this.#clients.push(client);
    return client;
  }

  close(): void {
    for (const m of this.#managers) m.abort();
  }
}

export interface LightAgentOptions {
  onMessage?: (m: ControlMessage, agent: LightAgent) => void;
  /** Register with cumulative_acks (the default), or get one ack per message like an older agent. */
  cumulativeAcks?: boolean;
}

export class LightAgent {
  readonly #out = new PushQueue<AgentMessage>();
  readonly #abort = new AbortController();
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
    client: Client<typeof AgentService>,
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
    this.send({ msg: { case: "register", value: registration(nodeId, opts.cumulativeAcks ?? true) } });
    this.ended = (async () => {
      try {
        for await (const m of client.connect(this.#out, { signal: this.#abort.signal })) {
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
        this.#end = new Error(`${this.nodeId}: the stream ended`);
      } catch (err) {
        this.#end = err;
      }
      onFailed(this.#end);
      for (const w of this.#ackWaiters.splice(0)) w.reject(this.#end);
      return this.#end;
    })();
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
    this.#out.push(create(AgentMessageSchema, m));
  }

  heartbeat(): void {
    this.send({ msg: { case: "heartbeat", value: { gpuMemoryUsedMb: [0n, 0n, 0n, 0n, 0n, 0n, 0n, 0n] } } });
  }

  /** Ends the stream (the gateway records the session closed). */
  close(): void {
    this.#out.end();
  }

  abort(): void {
    this.#abort.abort();
  }
}
