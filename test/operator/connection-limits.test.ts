/**
 * The operator API's listener limits against a real API on a real
 * nats-server, with raw TCP clients: silent, slow (slowloris) and idle
 * connections are closed, the per-address cap refuses the excess and the
 * metrics say so, oversized headers and bodies get their 4xx. Bounds are
 * generous liveness bounds, never timings.
 */
import assert from "node:assert/strict";
import * as net from "node:net";
import { after, before, describe, it } from "node:test";
import { type Log, openLog } from "../../src/log/index.js";
import { type ApiServer, startApi } from "../../src/operator/index.js";
import { type NatsServer, startServer, uniqueStream } from "../harness/nats.js";
import { eventually } from "../support/eventually.js";
import { rand } from "../support/gateway.js";

const TOKEN = "limits-token-5c1e9a7d3b8f2e6a0c4d9b1f7e3a5c8d";
const PER_ADDRESS = 4;
const CLOSED_WITHIN_MS = 15_000;

describe("operator API: connection limits", () => {
  let server: NatsServer & { close(): Promise<void> };
  let log: Log;
  let api: ApiServer;

  before(async () => {
    server = await startServer();
    log = await openLog({
      url: server.url,
      clientName: "test",
      name: uniqueStream("APILIM"),
      prefix: `t${rand()}.evt`,
    });
    api = await startApi({
      log,
      host: "127.0.0.1",
      port: 0,
      auth: { kind: "token", token: TOKEN },
      limits: {
        headersTimeoutMs: 1_000,
        requestTimeoutMs: 2_000,
        keepAliveTimeoutMs: 1_000,
        maxConnectionsPerAddress: PER_ADDRESS,
        maxHeaderBytes: 4 * 1024,
        bodyLimitBytes: 64 * 1024,
      },
    });
  });
  after(async () => {
    await api?.close();
    await log?.close();
    await server?.close();
  });

  const port = () => Number(new URL(api.url).port);
  const metric = async (re: RegExp) => re.exec(await api.registry.metrics())?.[1];
  const noneOpen = () =>
    eventually(async () => (await metric(/^llmgw_api_connections_open (\d+)$/m)) === "0", {
      what: "no connection open on the API",
    });

  /** A raw TCP client; `text()` is everything the API answered. */
  function connect(): Promise<{ socket: net.Socket; text: () => string; closed: Promise<void> }> {
    const socket = net.connect(port(), "127.0.0.1");
    let text = "";
    socket.on("data", (b: Buffer) => (text += b.toString("latin1")));
    socket.on("error", () => {});
    const closed = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`still open after ${CLOSED_WITHIN_MS} ms`)),
        CLOSED_WITHIN_MS,
      );
      socket.once("close", () => {
        clearTimeout(timer);
        resolve();
      });
    });
    closed.catch(() => {});
    return new Promise((resolve, reject) => {
      socket.once("connect", () => resolve({ socket, text: () => text, closed }));
      socket.once("error", reject);
    });
  }

  it("closes a connection that sends nothing", async () => {
    const c = await connect();
    try {
      await c.closed;
    } finally {
      c.socket.destroy();
    }
  });

  it("closes a slowloris connection whose headers never finish", async () => {
    const c = await connect();
    let stop = false;
    try {
      c.socket.write(`GET /v1/nodes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\n`);
      // One header line at a time, never the blank line that ends them, until the API gives up.
      void (async () => {
        for (let i = 0; !stop && !c.socket.destroyed; i++) {
          c.socket.write(`X-Slow-${i}: ${"a".repeat(8)}\r\n`);
          await new Promise((r) => setTimeout(r, 200));
        }
      })();
      await c.closed;
      assert.doesNotMatch(c.text(), /HTTP\/1.1 200/, "the request was never served");
    } finally {
      stop = true;
      c.socket.destroy();
    }
  });

  it("closes an idle keep-alive connection after its request", async () => {
    const c = await connect();
    try {
      c.socket.write(`GET /v1/nodes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`);
      await c.closed;
      assert.match(c.text(), /^HTTP\/1.1 200/, "the request was served first");
    } finally {
      c.socket.destroy();
    }
  });

  it("answers oversized headers 431 and an oversized body 413", async () => {
    const big = await connect();
    try {
      big.socket.write(`GET /v1/nodes HTTP/1.1\r\nHost: x\r\nX-Big: ${"b".repeat(8 * 1024)}\r\n\r\n`);
      await big.closed;
      assert.match(big.text(), /^HTTP\/1.1 431/);
    } finally {
      big.socket.destroy();
    }
    const res = await fetch(`${api.url}/v1/catalog`, {
      method: "PUT",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ pad: "c".repeat(128 * 1024) }),
    });
    assert.equal(res.status, 413);
  });

  it("refuses connections from one address over its cap, and the metrics show it", async () => {
    await noneOpen();
    const before = Number(
      (await metric(/^llmgw_api_connections_closed_total\{reason="address_cap"\} (\d+)$/m)) ?? 0,
    );
    const held: net.Socket[] = [];
    try {
      for (let i = 0; i < PER_ADDRESS; i++) held.push((await connect()).socket);
      await eventually(
        async () => (await metric(/^llmgw_api_connections_open (\d+)$/m)) === String(PER_ADDRESS),
        {
          what: `${PER_ADDRESS} connections counted open`,
        },
      );
      const excess = await connect();
      held.push(excess.socket);
      await excess.closed;
      assert.equal(excess.text(), "", "nothing was served on the excess connection");
      assert.equal(
        await metric(/^llmgw_api_connections_closed_total\{reason="address_cap"\} (\d+)$/m),
        String(before + 1),
      );
      assert.equal(
        await metric(/^llmgw_api_connections_limit\{scope="per_address"\} (\d+)$/m),
        String(PER_ADDRESS),
      );
      assert.equal(await metric(/^llmgw_api_connections_busiest_address (\d+)$/m), String(PER_ADDRESS));
    } finally {
      for (const s of held) s.destroy();
    }
  });
});
