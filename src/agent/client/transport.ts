/**
 * One HTTP/2 connection per agent stream: each node presents its own client
 * certificate, so connections are never shared between nodes.
 */
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { AgentService, type ControlMessage } from "../../gen/llmgw/v1/agent_pb.js";
import type { AgentMessageInit } from "./outbox.js";

/** A node's TLS identity: the CA that signed the gateway, and the node's own certificate and key. */
export interface TlsIdentity {
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

/** The part of the Connect client an agent uses: the bidi stream (a simulated transport offers the same). */
export interface AgentStreamClient {
  connect(
    requests: AsyncIterable<AgentMessageInit>,
    options: { signal: AbortSignal },
  ): AsyncIterable<ControlMessage>;
}

export interface AgentStreamConnection {
  client: AgentStreamClient;
  close(): void;
}

/** Opens a stream's connection to a gateway: `connectAgent` (HTTP/2), or a simulated transport. */
export type AgentConnect = (
  url: string,
  protocol: "connect" | "grpc",
  tls: TlsIdentity | undefined,
) => AgentStreamConnection;

export const connectAgent: AgentConnect = (url, protocol, tls) => {
  const sessionManager = new Http2SessionManager(url, {}, tls ? { ...tls } : {});
  const options = { baseUrl: url, httpVersion: "2" as const, sessionManager };
  const transport = protocol === "grpc" ? createGrpcTransport(options) : createConnectTransport(options);
  return {
    client: createClient(AgentService, transport),
    close: () => sessionManager.abort(),
  };
};
