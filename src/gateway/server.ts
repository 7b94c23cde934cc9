import * as http2 from "node:http2";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import type { Logger } from "pino";
import {
  capConnections,
  guardSessions,
  type Http2Limits,
  http2SecureServerOptions,
  http2ServerOptions,
} from "../connection-guard/index.js";
import { Health } from "../gen/grpc/health/v1/health_pb.js";
import { AgentService } from "../gen/llmgw/v1/agent_pb.js";
import {
  type AgentStreamHandler,
  directProtocol,
  protocolFamily,
  serveAgentCall,
} from "./agent-call/index.js";
import { parseListen } from "./config.js";
import { type HealthSource, healthService } from "./health-service.js";
import { contextValuesFor } from "./identity.js";
import type { GatewayMetrics } from "./metrics.js";

/** PEM material of the listener: its certificate and key, and the CA agents' certificates must verify against. */
export interface AgentServerTls {
  cert: string | Buffer;
  key: string | Buffer;
  clientCa: string | Buffer;
}

export interface AgentServerOptions {
  listen: string;
  /** Without it the server speaks h2c (insecure development mode). */
  tls: AgentServerTls | undefined;
  readMaxBytes: number;
  /** Connection caps, deadlines and HTTP/2 abuse limits. */
  limits: Http2Limits;
  metrics: GatewayMetrics;
  /** AgentService.Connect: one agent stream. */
  agentStream: AgentStreamHandler;
  /** grpc.health.v1.Health: what it answers. */
  health: HealthSource;
  /**
   * Serve binary, uncompressed gRPC and Connect agent streams directly
   * (src/gateway/agent-call) rather than through Connect's handler, which
   * serves every other request either way.
   */
  directStreams: boolean;
  /** Aborting it aborts every handler's signal. */
  shutdownSignal: AbortSignal;
  logger: Logger;
}

export interface AgentServer {
  /** Base URL agents connect to (https://host:port or http://host:port). */
  readonly url: string;
  /** Accept no new connections; open ones keep running. */
  stopAccepting(): void;
  /** New handshakes use `tls` from now on; open connections keep theirs. Throws for unusable material. */
  setTls(tls: AgentServerTls): void;
  /** Sends GOAWAY on every connection and closes them, destroying what is left after `graceMs`. */
  close(graceMs: number): Promise<void>;
}

/**
 * The HTTP/2 listener of the agent protocol. TLS asks for a client
 * certificate but does not refuse the handshake without a valid one: the
 * stream handler refuses it with a Connect code the agent can act on
 * (Unauthenticated), instead of a TLS alert it cannot tell from a network
 * fault; such a session carries only that one answer and is then closed
 * (src/connection-guard). gRPC, gRPC-Web and Connect are all served:
 * the agent stream in binary gRPC or Connect without compression or a
 * deadline (what agents send) directly, everything else by Connect's handler.
 */
export async function startAgentServer(opts: AgentServerOptions): Promise<AgentServer> {
  const connectHandler = connectNodeAdapter({
    routes: (router) => {
      router.service(AgentService, { connect: opts.agentStream });
      router.service(Health, healthService(opts.health));
    },
    readMaxBytes: opts.readMaxBytes,
    shutdownSignal: opts.shutdownSignal,
    contextValues: contextValuesFor,
  });
  const streamPath = `/${AgentService.typeName}/${AgentService.method.connect.name}`;
  const callOptions = {
    readMaxBytes: opts.readMaxBytes,
    shutdownSignal: opts.shutdownSignal,
    contextValues: contextValuesFor,
  };
  const handler = (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => {
    const protocol =
      opts.directStreams && req.url === streamPath ? directProtocol(req.method, req.headers) : undefined;
    if (protocol === undefined) {
      if (req.url === streamPath)
        opts.metrics.streamsServed.inc({
          path: "connect",
          protocol: protocolFamily(req.headers["content-type"]),
        });
      connectHandler(req, res);
      return;
    }
    opts.metrics.streamsServed.inc({ path: "direct", protocol });
    serveAgentCall(req, res, protocol, opts.agentStream, callOptions).catch((err: unknown) => {
      // The handler's own errors end the call with a status; this is the response failing under it.
      opts.logger.debug({ err: (err as Error).message }, "agent stream response failed");
      if (!res.stream.destroyed) res.stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    });
  };
  const secure = opts.tls
    ? http2.createSecureServer(
        {
          ...secureContextOptions(opts.tls),
          requestCert: true,
          rejectUnauthorized: false,
          ...http2SecureServerOptions(opts.limits),
        },
        handler,
      )
    : undefined;
  const server = secure ?? http2.createServer(http2ServerOptions(opts.limits), handler);
  capConnections(server, opts.limits, opts.metrics.connections, opts.logger);
  guardSessions(server, {
    limits: opts.limits,
    clientCertificates: opts.tls !== undefined,
    metrics: opts.metrics.connections,
    logger: opts.logger,
  });
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s: http2.ServerHttp2Session) => {
    sessions.add(s);
    s.once("close", () => sessions.delete(s));
    s.on("error", (err) => opts.logger.debug({ err: err.message }, "HTTP/2 session error"));
  });
  server.on("tlsClientError", (err) => opts.logger.debug({ err: err.message }, "TLS handshake failed"));
  server.on("sessionError", (err) => opts.logger.debug({ err: err.message }, "HTTP/2 session error"));

  const { host, port } = parseListen(opts.listen);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const addr = server.address();
  const bound = typeof addr === "object" && addr ? addr.port : port;
  const url = `${opts.tls ? "https" : "http"}://${host.includes(":") ? `[${host}]` : host}:${bound}`;

  let closed: Promise<void> | undefined;
  const stopAccepting = () => {
    if (!closed) closed = new Promise((resolve) => server.close(() => resolve()));
  };
  return {
    url,
    stopAccepting,
    setTls(tls: AgentServerTls) {
      secure?.setSecureContext(secureContextOptions(tls));
    },
    async close(graceMs: number) {
      stopAccepting();
      for (const s of sessions) if (!s.closed) s.close();
      const timer = setTimeout(() => {
        for (const s of sessions) s.destroy();
      }, graceMs);
      await closed;
      clearTimeout(timer);
    },
  };
}

/** What a TLS context is made of; also what a reload replaces (the request-a-certificate options stay the server's). */
function secureContextOptions(tls: AgentServerTls) {
  return { cert: tls.cert, key: tls.key, ca: tls.clientCa, minVersion: "TLSv1.2" as const };
}
