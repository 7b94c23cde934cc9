/**
 * One HTTP/2 connection per agent stream: each node presents its own client
 * certificate, so connections are never shared between nodes.
 */
import { type Client, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { AgentService } from "../../gen/llmgw/v1/agent_pb.js";

/** A node's TLS identity: the CA that signed the gateway, and the node's own certificate and key. */
export interface TlsIdentity {
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

export interface AgentStreamConnection {
  client: Client<typeof AgentService>;
  close(): void;
}

export function connectAgent(
  url: string,
  protocol: "connect" | "grpc",
  tls: TlsIdentity | undefined,
): AgentStreamConnection {
  const sessionManager = new Http2SessionManager(url, {}, tls ? { ...tls } : {});
  const options = { baseUrl: url, httpVersion: "2" as const, sessionManager };
  const transport = protocol === "grpc" ? createGrpcTransport(options) : createConnectTransport(options);
  return {
    client: createClient(AgentService, transport),
    close: () => sessionManager.abort(),
  };
}
