/**
 * One HTTP/2 connection per agent stream: each simulated node presents its
 * own client certificate, so connections are never shared between nodes.
 */
import { readFile } from "node:fs/promises";
import { type Client, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { AgentService } from "../gen/llmgw/v1/agent_pb.js";
import { certsLayout } from "./certs/layout.js";

/** A node's TLS identity: the CA that signed the gateway, and the node's own certificate and key. */
export interface TlsIdentity {
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

export interface AgentConnection {
  client: Client<typeof AgentService>;
  close(): void;
}

export function connectAgent(
  url: string,
  protocol: "connect" | "grpc",
  tls: TlsIdentity | undefined,
): AgentConnection {
  const sessionManager = new Http2SessionManager(url, {}, tls ? { ...tls } : {});
  const options = { baseUrl: url, httpVersion: "2" as const, sessionManager };
  const transport = protocol === "grpc" ? createGrpcTransport(options) : createConnectTransport(options);
  return {
    client: createClient(AgentService, transport),
    close: () => sessionManager.abort(),
  };
}

/** Reads a node's certificate files as written by `llmgw certs`; names the missing file and how to make it. */
export async function loadTlsIdentity(certsDir: string, nodeId: string): Promise<TlsIdentity> {
  const files = certsLayout(certsDir);
  const paths = { ca: files.ca, cert: files.nodeCert(nodeId), key: files.nodeKey(nodeId) };
  const out: Partial<TlsIdentity> = {};
  for (const [k, path] of Object.entries(paths) as [keyof TlsIdentity, string][]) {
    try {
      out[k] = await readFile(path);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw new Error(
        `cannot read ${path} (${code ?? String(err)}): create the fleet's certificates with ` +
          `\`llmgw certs --out ${certsDir} --node ${nodeId}\` (or --nodes N --node-prefix P), or use --insecure-dev`,
      );
    }
  }
  return out as TlsIdentity;
}
