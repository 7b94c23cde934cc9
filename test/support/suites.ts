/**
 * The setup the tests share: a nats-server for a describe block (and test
 * certificates, made when first asked for; or a client connection to it),
 * a log of its own on it, and a gateway over that log. The `*Suite`
 * functions register the before/after hooks themselves, so call them in a
 * describe body and read their fields inside tests and hooks only.
 */
import { after, before } from "node:test";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { Gateway } from "../../src/gateway/index.js";
import { type Log, openLog } from "../../src/log/index.js";
import { startServer, uniqueStream } from "../harness/nats.js";
import { makeTestCerts, type TestCerts } from "./certs.js";
import { rand, startTestGateway, type TestGatewayOptions } from "./gateway.js";

export type Server = Awaited<ReturnType<typeof startServer>>;

/**
 * For the describe block this is called in: a nats-server and what `start`
 * builds on it, started before its tests and stopped after them (what was
 * built first, the server last). The getter throws outside tests and hooks.
 */
export function onSuiteServer<T>(
  what: string,
  start: (server: Server) => Promise<T>,
  stop: (value: T) => Promise<void>,
): () => { server: Server; value: T } {
  let started: { server: Server; value: T } | undefined;
  before(async () => {
    const server = await startServer();
    try {
      started = { server, value: await start(server) };
    } catch (err) {
      await server.close();
      throw err;
    }
  });
  after(async () => {
    if (!started) return;
    try {
      await stop(started.value);
    } finally {
      await started.server.close();
    }
  });
  return () => {
    if (!started) throw new Error(`${what} is not started: read it inside a test or hook`);
    return started;
  };
}

export interface ServerSuite {
  readonly server: Server;
  readonly certs: TestCerts;
  /** The TLS options of an agent whose certificate names `cn`. */
  tls(cn: string): { ca: string; cert: string; key: string };
}

/** What a suite's tests read: its server, and test certificates made when first asked for. */
class SuiteView<T> implements ServerSuite {
  #certs: TestCerts | undefined;
  constructor(protected readonly started: () => { server: Server; value: T }) {}
  get server(): Server {
    return this.started().server;
  }
  get certs(): TestCerts {
    this.#certs ??= makeTestCerts();
    return this.#certs;
  }
  // A property, not a method: tests pass it around on its own.
  readonly tls = (cn: string) => ({ ca: this.certs.ca, ...this.certs.client(cn) });
}

/** One nats-server for the describe block this is called in. */
export function serverSuite(): ServerSuite {
  return new SuiteView(
    onSuiteServer(
      "the suite's nats-server",
      async () => undefined,
      async () => {},
    ),
  );
}

export interface ConnectionSuite {
  readonly server: Server;
  readonly nc: NatsConnection;
}

/** One nats-server for the describe block, and one client connection to it. */
export function connectionSuite(): ConnectionSuite {
  const s = onSuiteServer(
    "the suite's connection",
    (server) => connect({ servers: server.url }),
    (nc) => nc.close(),
  );
  return {
    get server() {
      return s().server;
    },
    get nc() {
      return s().value;
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
  // The hooks run after this returns, so the gateway can be given the view's certificates.
  const view: GatewaySuiteView = new GatewaySuiteView(
    onSuiteServer(
      "the suite's gateway",
      (server) =>
        startGatewayOnNewLog(server.url, tag, {
          ...(options.withCerts ? { certs: view.certs } : {}),
          ...options.gateway?.(),
        }),
      (on) => on.close(),
    ),
  );
  return view;
}

class GatewaySuiteView extends SuiteView<GatewayOnLog> implements GatewaySuite {
  get gw(): Gateway {
    return this.started().value.gw;
  }
  get log(): Log {
    return this.started().value.log;
  }
  get stream(): string {
    return this.started().value.stream;
  }
  get prefix(): string {
    return this.started().value.prefix;
  }
}
