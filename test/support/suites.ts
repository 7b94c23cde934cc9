/**
 * The setup the tests share: a nats-server for a describe block (and test
 * certificates, made when first asked for; or a client connection to it),
 * a log of its own on it, and a gateway over that log. The `*Suite` functions register the
 * before/after hooks themselves, so call them in a describe body and read
 * their fields inside tests and hooks only.
 */
import { after, before } from "node:test";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { Gateway } from "../../src/gateway/index.js";
import { type Log, openLog } from "../../src/log/index.js";
import { startServer, uniqueStream } from "../harness/nats.js";
import { makeTestCerts, type TestCerts } from "./certs.js";
import { rand, startTestGateway, type TestGatewayOptions } from "./gateway.js";

type Server = Awaited<ReturnType<typeof startServer>>;

export interface ServerSuite {
  readonly server: Server;
  readonly certs: TestCerts;
  /** The TLS options of an agent whose certificate names `cn`. */
  tls(cn: string): { ca: string; cert: string; key: string };
}

/** One nats-server for the describe block this is called in. */
export function serverSuite(): ServerSuite {
  const s = serverHolder();
  before(s.start);
  after(s.stop);
  return s.suite;
}

/**
 * A suite's server with its start and stop apart from the hooks, so a suite
 * with more to set up and tear down can start the server first and stop it last.
 */
export function serverHolder(): { start(): Promise<void>; stop(): Promise<void>; suite: ServerSuite } {
  let server: Server | undefined;
  let certs: TestCerts | undefined;
  const suite: ServerSuite = {
    get server() {
      if (!server) throw new Error("the suite's nats-server is not started: read it inside a test or hook");
      return server;
    },
    get certs() {
      certs ??= makeTestCerts();
      return certs;
    },
    tls: (cn) => ({ ca: suite.certs.ca, ...suite.certs.client(cn) }),
  };
  return {
    start: async () => {
      server = await startServer();
    },
    stop: async () => {
      await server?.close();
    },
    suite,
  };
}

export interface ConnectionSuite {
  readonly server: Server;
  readonly nc: NatsConnection;
}

/** One nats-server for the describe block, and one client connection to it. */
export function connectionSuite(): ConnectionSuite {
  const s = serverHolder();
  let nc: NatsConnection | undefined;
  before(async () => {
    await s.start();
    nc = await connect({ servers: s.suite.server.url });
  });
  after(async () => {
    try {
      await nc?.close();
    } finally {
      await s.stop();
    }
  });
  return {
    get server() {
      return s.suite.server;
    },
    get nc() {
      if (!nc) throw new Error("the suite's connection is not open: read it inside a test or hook");
      return nc;
    },
  };
}

export interface TestLog {
  log: Log;
  stream: string;
  prefix: string;
  /** Deletes the stream and closes the connection. */
  close(): Promise<void>;
}

/** A stream and subject prefix no other test uses. */
export async function openTestLog(natsUrl: string, tag: string): Promise<TestLog> {
  const stream = uniqueStream(tag);
  const prefix = `t${rand()}.evt`;
  const log = await openLog({ url: natsUrl, clientName: "test", name: stream, prefix });
  return {
    log,
    stream,
    prefix,
    close: async () => {
      await log.jsm.streams.delete(stream).catch(() => {});
      await log.close();
    },
  };
}

/** Runs `fn` with a log of its own, deleted afterwards. */
export async function withTestLog<T>(natsUrl: string, tag: string, fn: (log: Log) => Promise<T>): Promise<T> {
  const t = await openTestLog(natsUrl, tag);
  try {
    return await fn(t.log);
  } finally {
    await t.close();
  }
}

export interface GatewayOnLog extends TestLog {
  gw: Gateway;
}

/** A gateway in this process over a log of its own; `close` drains it and deletes the log. */
export async function startGatewayOnNewLog(
  natsUrl: string,
  tag: string,
  options: Partial<TestGatewayOptions> = {},
): Promise<GatewayOnLog> {
  const t = await openTestLog(natsUrl, tag);
  let gw: Gateway;
  try {
    gw = await startTestGateway({ nats: natsUrl, stream: t.stream, prefix: t.prefix, ...options });
  } catch (err) {
    await t.close();
    throw err;
  }
  return {
    ...t,
    gw,
    close: async () => {
      await gw.drain("test over");
      await t.close();
    },
  };
}

export interface GatewaySuite extends ServerSuite {
  readonly gw: Gateway;
  readonly log: Log;
  readonly stream: string;
  readonly prefix: string;
}

/**
 * A nats-server and one gateway over a log of its own for the whole describe
 * block. `options` is read when the hooks run; `withCerts` gives the gateway
 * the suite's certificates (mTLS) instead of insecure-dev mode.
 */
export function gatewaySuite(
  tag: string,
  options: { withCerts?: boolean; gateway?: () => Partial<TestGatewayOptions> } = {},
): GatewaySuite {
  const holder = serverHolder();
  const base = holder.suite;
  let on: GatewayOnLog | undefined;
  before(async () => {
    await holder.start();
    on = await startGatewayOnNewLog(base.server.url, tag, {
      ...(options.withCerts ? { certs: base.certs } : {}),
      ...options.gateway?.(),
    });
  });
  after(async () => {
    try {
      await on?.close();
    } finally {
      await holder.stop();
    }
  });
  const started = (): GatewayOnLog => {
    if (!on) throw new Error("the suite's gateway is not started: read it inside a test or hook");
    return on;
  };
  return {
    get server() {
      return base.server;
    },
    get certs() {
      return base.certs;
    },
    tls: base.tls,
    get gw() {
      return started().gw;
    },
    get log() {
      return started().log;
    },
    get stream() {
      return started().stream;
    },
    get prefix() {
      return started().prefix;
    },
  };
}
