/**
 * The agent listener's connection hygiene against a real gateway on a real
 * nats-server, with raw TCP, TLS and HTTP/2 clients: connections that do
 * nothing useful are closed within their deadlines, a peer without a client
 * certificate gets its Unauthenticated answer and loses the connection, the
 * per-address cap refuses the excess (and says so in the metrics), and a
 * rapid-reset client is cut off while an honest agent keeps being served.
 * Bounds are generous liveness bounds, never timings.
 */
import assert from "node:assert/strict";
import * as http2 from "node:http2";
import * as net from "node:net";
import { describe, it } from "node:test";
import * as tls from "node:tls";
import type { GuardReason } from "../../src/connection-guard/index.js";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { TestAgent } from "../support/agent.js";
import { eventually } from "../support/eventually.js";
import { rapidResetConnection } from "../support/rapid-reset.js";
import { encode, frame } from "../support/raw-agent.js";
import { h100Registration } from "../support/sample-events.js";
import { gatewaySuite } from "../support/suites.js";

const PER_ADDRESS = 8;
/** Far above every deadline the suite's gateway is given: a liveness bound. */
const CLOSED_WITHIN_MS = 15_000;
const PATH = "/llmgw.v1.AgentService/Connect";
const CONNECT_HEADERS: http2.OutgoingHttpHeaders = {
  ":method": "POST",
  ":path": PATH,
  "content-type": "application/connect+proto",
  "connect-protocol-version": "1",
};

describe("gateway: connection limits", () => {
  const env = gatewaySuite("GWLIMITS", {
    withCerts: true,
    gateway: () => ({
      connectionLimits: {
        handshakeTimeoutMs: 1_000,
        firstStreamTimeoutMs: 1_000,
        idleSessionTimeoutMs: 1_000,
        unauthenticatedGraceMs: 1_000,
        maxConnectionsPerAddress: PER_ADDRESS,
        maxStreamResets: 20,
      },
    }),
  });

  const host = () => new URL(env.gw.url);
  const closedBy = async (reason: GuardReason) =>
    (await env.gw.metrics.connections.closed.get()).values.find((v) => v.labels["reason"] === reason)
      ?.value ?? 0;
  /** Earlier tests' connections are gone on the gateway's side too. */
  const noneOpen = () =>
    eventually(async () => (await env.gw.metrics.connections.open.get()).values[0]?.value === 0, {
      what: "no connection open on the gateway",
    });

  /** Resolves once `socket` is closed; rejects after the liveness bound, naming `what`. */
  function closedWithin(socket: net.Socket | http2.ClientHttp2Session, what: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${what}: still open after ${CLOSED_WITHIN_MS} ms`)),
        CLOSED_WITHIN_MS,
      );
      socket.once("close", () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  function tlsConnect(withCert: string | undefined): Promise<tls.TLSSocket> {
    const { hostname, port } = host();
    const s = tls.connect({
      host: hostname,
      port: Number(port),
      servername: "localhost",
      ALPNProtocols: ["h2"],
      ...(withCert ? env.tls(withCert) : { ca: env.certs.ca }),
    });
    s.on("error", () => {});
    // Reading, so the gateway's close is seen.
    s.resume();
    return new Promise((resolve, reject) => {
      s.once("secureConnect", () => resolve(s));
      s.once("close", () => reject(new Error("the TLS handshake did not complete")));
    });
  }

  function h2Connect(withCert: string | undefined): Promise<http2.ClientHttp2Session> {
    const s = http2.connect(env.gw.url, withCert ? env.tls(withCert) : { ca: env.certs.ca });
    s.on("error", () => {});
    return new Promise((resolve, reject) => {
      s.once("remoteSettings", () => resolve(s));
      s.once("close", () => reject(new Error("the HTTP/2 session did not start")));
    });
  }

  /** One Connect stream carrying a registration, half-closed; resolves with what the gateway answered. */
  function registerOnce(session: http2.ClientHttp2Session, node: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const req = session.request(CONNECT_HEADERS);
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("error", reject);
      req.on("close", () => resolve(Buffer.concat(chunks).toString("latin1")));
      req.end(frame(encode({ msg: { case: "register", value: h100Registration(node) } })));
    });
  }

  it("closes a TCP connection that never starts TLS within the handshake timeout", async () => {
    const before = await closedBy("handshake_timeout");
    const s = net.connect(Number(host().port), host().hostname);
    s.on("error", () => {});
    s.resume();
    try {
      await closedWithin(s, "a silent TCP connection");
      assert.ok((await closedBy("handshake_timeout")) > before, "counted as handshake_timeout");
    } finally {
      s.destroy();
    }
  });

  it("closes a TLS connection with a valid certificate that never sends the HTTP/2 preface", async () => {
    const before = await closedBy("first_stream_deadline");
    const s = await tlsConnect("gpu-l1");
    try {
      await closedWithin(s, "a TLS connection without the preface");
      assert.ok((await closedBy("first_stream_deadline")) > before, "counted as first_stream_deadline");
    } finally {
      s.destroy();
    }
  });

  it("closes a TLS connection without a client certificate at once", async () => {
    const before = await closedBy("unauthenticated");
    const s = await tlsConnect(undefined);
    try {
      await closedWithin(s, "a TLS connection without a certificate");
      assert.ok((await closedBy("unauthenticated")) > before, "counted as unauthenticated");
    } finally {
      s.destroy();
    }
  });

  it("answers a stream without a certificate Unauthenticated, then closes its connection", async () => {
    const before = await closedBy("unauthenticated");
    const session = await h2Connect(undefined);
    try {
      const closed = closedWithin(session, "the connection of an unauthenticated stream");
      const answer = await registerOnce(session, "gpu-l2");
      assert.match(answer, /unauthenticated.*no client certificate/);
      await closed;
      assert.ok((await closedBy("unauthenticated")) > before, "closed as unauthenticated, not idle");
    } finally {
      session.destroy();
    }
  });

  it("closes an HTTP/2 session that opens no stream", async () => {
    const before = await closedBy("first_stream_deadline");
    const session = await h2Connect("gpu-l3");
    try {
      await closedWithin(session, "an HTTP/2 session without a stream");
      assert.ok((await closedBy("first_stream_deadline")) > before, "counted as first_stream_deadline");
    } finally {
      session.destroy();
    }
  });

  it("closes a session whose stream ended after the idle timeout", async () => {
    const before = await closedBy("idle");
    const session = await h2Connect("gpu-l4");
    try {
      const closed = closedWithin(session, "a session whose stream ended");
      // The registration is acknowledged; the half-close then ends the stream.
      assert.match(await registerOnce(session, "gpu-l4"), /register/);
      await closed;
      assert.ok((await closedBy("idle")) > before, "counted as idle");
    } finally {
      session.destroy();
    }
  });

  it("announces its stream and header limits, refuses a stream whose headers are over it, and serves the next one", async () => {
    const session = await h2Connect("gpu-l7");
    try {
      assert.equal(session.remoteSettings.maxConcurrentStreams, 100, "SETTINGS_MAX_CONCURRENT_STREAMS");
      assert.equal(session.remoteSettings.maxHeaderListSize, 16 * 1024, "SETTINGS_MAX_HEADER_LIST_SIZE");
      const refused = await new Promise<number>((resolve) => {
        const req = session.request({ ...CONNECT_HEADERS, "x-padding": "p".repeat(32 * 1024) });
        req.on("error", () => {});
        req.resume();
        req.on("close", () => resolve(req.rstCode));
        req.end();
      });
      assert.equal(refused, http2.constants.NGHTTP2_ENHANCE_YOUR_CALM, "the stream was reset");
      assert.match(await registerOnce(session, "gpu-l7"), /register/, "the next stream is served");
    } finally {
      session.destroy();
    }
  });

  it("refuses connections from one address over its cap, and the metrics show the cap and the refusals", async () => {
    await noneOpen();
    const before = await closedBy("address_cap");
    const held: net.Socket[] = [];
    try {
      for (let i = 0; i < PER_ADDRESS; i++) {
        const s = net.connect(Number(host().port), host().hostname);
        s.on("error", () => {});
        s.resume();
        held.push(s);
        await new Promise((resolve) => s.once("connect", resolve));
      }
      await eventually(
        async () => (await env.gw.metrics.connections.open.get()).values[0]?.value === PER_ADDRESS,
        {
          what: `${PER_ADDRESS} connections counted open`,
        },
      );
      const excess = net.connect(Number(host().port), host().hostname);
      excess.on("error", () => {});
      excess.resume();
      held.push(excess);
      await closedWithin(excess, "a connection over the per-address cap");
      assert.equal(await closedBy("address_cap"), before + 1, "the excess counted as address_cap");
      const text = await env.gw.metrics.registry.metrics();
      assert.match(
        text,
        new RegExp(`llmgw_gateway_connections_limit\\{scope="per_address"\\} ${PER_ADDRESS}\\n`),
      );
      assert.match(text, new RegExp(`llmgw_gateway_connections_busiest_address ${PER_ADDRESS}\\n`));
      assert.match(text, /llmgw_gateway_connections_closed_total\{reason="address_cap"\} [1-9]/);
    } finally {
      for (const s of held) s.destroy();
    }
  });

  it("destroys a rapid-reset client's session while an honest agent's heartbeats are acknowledged", async () => {
    await noneOpen();
    const before = await closedBy("stream_resets");
    const honest = await TestAgent.connect({
      baseUrl: env.gw.url,
      tls: env.tls("gpu-l5"),
      registration: h100Registration("gpu-l5"),
    });
    /** A heartbeat, then a shard status whose ack (heartbeats have none) shows the stream is read and served. */
    let reports = 0;
    const served = () => {
      honest.heartbeat();
      const seq = honest.shardStatus({
        replicaId: "r-1",
        shardId: `sh-${++reports}`,
        state: ShardStatus_State.RUNNING,
      });
      return honest.waitForAck(seq, 10_000);
    };
    let stop = false;
    try {
      // Raw frames: HEADERS and RST_STREAM pairs as fast as the socket takes them, until the gateway closes it.
      const { hostname, port } = host();
      const attack = rapidResetConnection(
        { host: hostname, port: Number(port), servername: "localhost", ...env.tls("gpu-l6") },
        () => stop,
      );
      let attacking = true;
      const serving = (async () => {
        let n = 0;
        while (attacking) {
          await served();
          n++;
        }
        return n;
      })();
      const bound = setTimeout(() => {
        stop = true;
      }, CLOSED_WITHIN_MS);
      const streams = await attack;
      clearTimeout(bound);
      attacking = false;
      assert.equal(stop, false, `the rapid-reset connection was still open after ${CLOSED_WITHIN_MS} ms`);
      assert.ok(streams > 20, "the attacker reset more streams than the limit");
      assert.ok((await closedBy("stream_resets")) > before, "counted as stream_resets");
      assert.ok((await serving) >= 1, "the honest agent was served during the attack");
      for (let i = 0; i < 3; i++) await served();
      assert.equal(honest.done, false, "the honest agent's stream is still open");
    } finally {
      stop = true;
      honest.abort();
    }
  });
});
