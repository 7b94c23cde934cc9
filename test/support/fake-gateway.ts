/**
 * A minimal real Connect server implementing AgentService.Connect, for testing
 * agents: it acks registrations, records everything each stream says, and lets
 * the test send commands, send Reconnect, or close a stream.
 */
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import type { TLSSocket } from "node:tls";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { type ConnectRouter, createContextKey, createContextValues } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { PushQueue } from "../../src/async/push-queue.js";
import {
  type AgentMessage,
  AgentService,
  type ControlMessage,
  ControlMessageSchema,
  type Register,
} from "../../src/gen/llmgw/v1/agent_pb.js";
import { unreachablePort } from "./unreachable.js";

type ControlInit = MessageInitShape<typeof ControlMessageSchema>;

export interface AgentStream {
  /** The node id of the stream's Register (empty until it arrived). */
  nodeId: string;
  register: Register | undefined;
  /** The verified client certificate's CN, with TLS. */
  peerCn: string | undefined;
  /** Everything after the Register, in order. */
  messages: AgentMessage[];
  /** True once either side ended the stream. */
  ended: boolean;
  send(msg: ControlInit): void;
  /** Ends the stream from the gateway's side. */
  close(): void;
}

const peerCnKey = createContextKey<string | undefined>(undefined);

export class FakeGateway {
  readonly streams: AgentStream[] = [];
  private readonly sessions = new Set<http2.Http2Session>();
  private nextCommand = 1;

  private constructor(
    private readonly server: http2.Http2Server | http2.Http2SecureServer,
    readonly url: string,
  ) {}

  /** h2c without `tls`; with `tls`, client certificates are required and verified against `ca`. */
  static async start(tls?: { key: Buffer; cert: Buffer; ca: Buffer }): Promise<FakeGateway> {
    let self: FakeGateway | undefined;
    const routes = (router: ConnectRouter) =>
      router.service(AgentService, {
        connect: (requests, ctx) => self!.serve(requests, ctx.values.get(peerCnKey)),
      });
    const handler = connectNodeAdapter({
      routes,
      contextValues: (req) => {
        const socket = req.socket as TLSSocket;
        const peer =
          typeof socket.getPeerCertificate === "function" ? socket.getPeerCertificate() : undefined;
        return createContextValues().set(peerCnKey, peer?.subject?.CN);
      },
    });
    const server = tls
      ? http2.createSecureServer({ ...tls, requestCert: true, rejectUnauthorized: true }, handler)
      : http2.createServer(handler);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as AddressInfo).port;
    self = new FakeGateway(server, `${tls ? "https" : "http"}://127.0.0.1:${port}`);
    server.on("session", (s) => {
      self!.sessions.add(s);
      s.on("close", () => self!.sessions.delete(s));
    });
    return self;
  }

  private async *serve(requests: AsyncIterable<AgentMessage>, peerCn: string | undefined) {
    const out = new PushQueue<ControlMessage>();
    const stream: AgentStream = {
      nodeId: "",
      register: undefined,
      peerCn,
      messages: [],
      ended: false,
      send: (msg) => out.push(create(ControlMessageSchema, msg)),
      close: () => {
        stream.ended = true;
        out.end();
      },
    };
    this.streams.push(stream);
    void (async () => {
      try {
        for await (const m of requests) {
          if (!stream.register && m.msg.case === "register") {
            stream.register = m.msg.value;
            stream.nodeId = m.msg.value.nodeId;
            stream.send({ msg: { case: "ack", value: { messageId: "register", ok: true } } });
          } else {
            stream.messages.push(m);
          }
        }
      } catch {
        // The agent went away; the stream is over either way.
      }
      stream.close();
    })();
    yield* out;
  }

  /** Streams of a node, oldest first. */
  of(nodeId: string): AgentStream[] {
    return this.streams.filter((s) => s.nodeId === nodeId);
  }

  latest(nodeId: string): AgentStream | undefined {
    return this.of(nodeId).at(-1);
  }

  /** Sends a command to the node's latest stream; returns the command id. */
  command(nodeId: string, msg: ControlInit["msg"]): string {
    const s = this.latest(nodeId);
    if (!s) throw new Error(`no stream from ${nodeId}`);
    const commandId = `cmd-${this.nextCommand++}`;
    const value = { ...(msg?.value ?? {}), commandId };
    s.send({ msg: { ...msg, value } as ControlInit["msg"] });
    return commandId;
  }

  async close(): Promise<void> {
    for (const s of this.streams) s.close();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const s of this.sessions) s.destroy();
    await closed;
  }
}

/** Waits until `check` returns a value other than undefined/false, or fails naming `what`. */
export async function waitFor<T>(
  what: string,
  check: () => T | undefined | false,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * A loopback URL on which no gateway can be reached while it is held: every
 * connection is reset at once (see unreachablePort). Close it when done.
 */
export async function deadUrl(): Promise<{ url: string; close(): Promise<void> }> {
  const held = await unreachablePort();
  return { url: `http://127.0.0.1:${held.port}`, close: () => held.close() };
}
