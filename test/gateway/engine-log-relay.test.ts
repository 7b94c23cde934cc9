/**
 * The gateway's relay of engine output (`llmgw logs`), on a real
 * nats-server and a real gateway, with agents on real streams that answer
 * as a well-behaved agent does, or do not: the API's request reaches the
 * agent on its stream and the agent's chunks reach the API, none of it in
 * the log; a chunk over the gateway's size cap ends the request (and
 * cancels it at the agent); another node's session cannot inject output
 * into a request; an API that leaves cancels at the agent; a node not held
 * here, and a stream that ends, say so.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { NatsConnection } from "@nats-io/transport-node";
import { askEngineLog, EngineLogSubjects, type LogPiece } from "../../src/engine-logs/index.js";
import type { Gateway } from "../../src/gateway/index.js";
import { EngineLogChunk_End } from "../../src/gen/llmgw/v1/agent_pb.js";
import { connectNats, type Log, openLog } from "../../src/log/index.js";
import { type NatsServer, startServer, uniqueStream } from "../harness/nats.js";
import { TestAgent } from "../support/agent.js";
import { rand, readAll, startTestGateway } from "../support/gateway.js";
import { h100Registration } from "../support/sample-events.js";

async function collect(
  pieces: AsyncIterable<LogPiece>,
): Promise<{ text: string; end: LogPiece | undefined }> {
  let text = "";
  for await (const p of pieces) {
    if (p.kind === "data") text += Buffer.from(p.data).toString();
    else return { text, end: p };
  }
  return { text, end: undefined };
}

describe("engine-log relay through a gateway (real nats-server, gateway and streams)", () => {
  let server: NatsServer & { close(): Promise<void> };
  let gw: Gateway;
  let log: Log;
  let nc: NatsConnection;
  let subjects: EngineLogSubjects;
  const agents: TestAgent[] = [];
  before(async () => {
    server = await startServer();
    const stream = uniqueStream("ELR");
    const prefix = `elr${rand()}.evt`;
    log = await openLog({ url: server.url, clientName: "test", name: stream, prefix });
    gw = await startTestGateway({ nats: server.url, stream, prefix, readMaxBytes: 256 * 1024 });
    nc = await connectNats({ url: server.url, name: "test api" });
    subjects = new EngineLogSubjects(prefix);
  });
  after(async () => {
    for (const a of agents) a.abort();
    await nc?.close();
    await gw?.drain("test over").catch(() => {});
    await log?.close();
    await server?.close();
  });

  const agent = async (nodeId: string) => {
    const a = await TestAgent.connect({ baseUrl: gw.url, registration: h100Registration(nodeId) });
    agents.push(a);
    return a;
  };
  const ask = (nodeId: string, follow = false) =>
    askEngineLog({
      nc,
      subjects,
      gatewayId: gw.config.id,
      ask: { nodeId, shardId: "s-1", tailLines: 10, follow },
    });
  /** The agent's `n`-th log request (not a cancel), once it has arrived. */
  const requestOf = async (a: TestAgent, n: number) => {
    const requests = () =>
      a.received.flatMap((m) => (m.msg.case === "engineLog" && !m.msg.value.cancel ? [m.msg.value] : []));
    await a.waitFor(() => requests().length >= n, { what: `log request ${n}`, timeoutMs: 10_000 });
    return requests()[n - 1]!;
  };

  it("relays the agent's chunks to the API, never into the log", async () => {
    const a = await agent("gpu-el1");
    const asked = await ask("gpu-el1");
    assert.ok(asked.ok, JSON.stringify(asked));
    const req = await requestOf(a, 1);
    assert.equal(req.shardId, "s-1");
    assert.equal(req.tailLines, 10);
    a.send({
      msg: { case: "engineLog", value: { requestId: req.requestId, data: Buffer.from("line one\n") } },
    });
    a.send({
      msg: {
        case: "engineLog",
        value: { requestId: req.requestId, data: Buffer.from("line two\n"), end: EngineLogChunk_End.DONE },
      },
    });
    const got = await collect(asked.pieces);
    assert.equal(got.text, "line one\nline two\n");
    assert.deepEqual(got.end, { kind: "end", end: "done", error: "" });
    // The session goes on (the chunks counted as messages): a heartbeat after them is taken.
    a.heartbeat({});
    const records = await readAll(log);
    assert.ok(
      !records.some((r) =>
        JSON.stringify(r.event.body.value ?? {}, (_k, v) => (typeof v === "bigint" ? String(v) : v)).includes(
          "line one",
        ),
      ),
    );
    assert.equal(a.done, false);
  });

  it("ends a request whose chunk is over the cap, and cancels it at the agent", async () => {
    const a = await agent("gpu-el2");
    const asked = await ask("gpu-el2", true);
    assert.ok(asked.ok);
    const req = await requestOf(a, 1);
    a.send({
      msg: { case: "engineLog", value: { requestId: req.requestId, data: new Uint8Array(70 * 1024) } },
    });
    const got = await collect(asked.pieces);
    assert.equal(got.text, "");
    assert.equal(got.end?.kind === "end" && got.end.end, "limit");
    await a.waitFor(
      (m) => m.msg.case === "engineLog" && m.msg.value.cancel && m.msg.value.requestId === req.requestId,
      { what: "the cancel", timeoutMs: 10_000 },
    );
    assert.equal(gw.engineLogRequests, 0);
  });

  it("takes a request's output only from the session it was sent on", async () => {
    const a = await agent("gpu-el3");
    const mallory = await agent("gpu-el4");
    const asked = await ask("gpu-el3");
    assert.ok(asked.ok);
    const req = await requestOf(a, 1);
    const before =
      (await gw.metrics.engineLogDropped.get()).values.find((v) => v.labels.reason === "stray")?.value ?? 0;
    mallory.send({
      msg: {
        case: "engineLog",
        value: { requestId: req.requestId, data: Buffer.from("forged\n"), end: EngineLogChunk_End.DONE },
      },
    });
    // Time for the forged chunk to be relayed, were it to be.
    await new Promise((r) => setTimeout(r, 300));
    a.send({
      msg: {
        case: "engineLog",
        value: { requestId: req.requestId, data: Buffer.from("real\n"), end: EngineLogChunk_End.DONE },
      },
    });
    const got = await collect(asked.pieces);
    assert.equal(got.text, "real\n");
    const after =
      (await gw.metrics.engineLogDropped.get()).values.find((v) => v.labels.reason === "stray")?.value ?? 0;
    assert.equal(after, before + 1, "the forged chunk counted as stray");
  });

  it("cancels at the agent when the API leaves; says not connected, and disconnected when the stream ends", async () => {
    const a = await agent("gpu-el5");
    const asked = await ask("gpu-el5", true);
    assert.ok(asked.ok);
    const req = await requestOf(a, 1);
    assert.equal(req.follow, true);
    asked.close();
    await a.waitFor(
      (m) => m.msg.case === "engineLog" && m.msg.value.cancel && m.msg.value.requestId === req.requestId,
      { what: "the cancel", timeoutMs: 10_000 },
    );

    const nobody = await ask("gpu-not-here");
    assert.equal(nobody.ok, false);
    assert.ok(!nobody.ok && nobody.end === "not-connected", JSON.stringify(nobody));
    assert.match(
      !nobody.ok ? nobody.error : "",
      /the agent of node gpu-not-here is not connected to gateway/,
    );

    const again = await ask("gpu-el5", true);
    assert.ok(again.ok);
    await requestOf(a, 2);
    a.abort();
    const got = await collect(again.pieces);
    assert.equal(got.end?.kind === "end" && got.end.end, "disconnected");
  });
});
