import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { headers } from "@nats-io/transport-node";
import { connectNats, openLog } from "../../src/log/index.js";
import { parsePubAck } from "../../src/log/pub-ack.js";
import { startServer, uniqueStream } from "../harness/nats.js";

const bytes = (s: string) => new TextEncoder().encode(s);

describe("parsePubAck (the common publish ack, read from its bytes)", () => {
  it("reads what JSON.parse reads from the acks nats-server writes", () => {
    for (const text of [
      // as nats-server 2.10 writes them
      '{"stream":"LLMGW", "seq":1}',
      '{"stream":"INGEST_abc-1", "seq":123456789}',
      '{"stream":"LLMGW", "seq":42,"duplicate": true}',
      `{"stream":"S", "seq":${Number.MAX_SAFE_INTEGER}}`,
      // other whitespace JSON allows between the members
      '{"stream":"LLMGW","seq":1}',
      '{"stream":"LLMGW","seq":42,"duplicate":true}',
      '{"stream":"LLMGW",\t"seq": 7 , "duplicate" :true }',
      // a name other than the last one read (the name is cached)
      '{"stream":"OTHER", "seq":3}',
      '{"stream":"LLMGW", "seq":4}',
    ]) {
      const json = JSON.parse(text) as { stream: string; seq: number; duplicate?: boolean };
      assert.deepEqual(parsePubAck(bytes(text)), { ...json, duplicate: json.duplicate === true }, text);
    }
  });

  it("leaves every other shape to the JSON parser", () => {
    for (const text of [
      "",
      '{"error":{"code":503,"err_code":10077,"description":"wrong last sequence"}}',
      '{"stream":"LLMGW", "domain":"hub", "seq":1}',
      '{"stream":"LLMGW", "seq":1,"duplicate": false}',
      '{"stream":"LLMGW" "seq":1}',
      '{"stream":"", "seq":1}',
      '{"stream":"LLMGW", "seq":}',
      '{"stream":"LLMGW", "seq":-1}',
      '{"stream":"LLMGW", "seq":1.5}',
      '{"stream":"LLMGW", "seq":1}x',
      '{"stream":"LLMGW", "seq":1,}',
      '{"stream":"LLMGW", "seq":12345678901234567}',
      '{"stream":"LLMGW", "seq":9007199254740993}',
      '{"stream":"LL\\"MGW", "seq":1}',
      '{"stream":"LLMGWé", "seq":1}',
      '{"stream":"LLMGW"',
    ]) {
      assert.equal(parsePubAck(bytes(text)), undefined, text);
    }
  });

  it("reads the acks of a real nats-server, a first publish and a duplicate, without JSON", async () => {
    const server = await startServer();
    try {
      const log = await openLog({ url: server.url, clientName: "pub-ack-test", name: uniqueStream("ACK") });
      const nc = await connectNats({ url: server.url, name: "pub-ack-test" });
      try {
        const subject = log.subjects.node("gpu-1");
        const seen: Array<{ seq: number; duplicate: boolean }> = [];
        for (const id of ["m-1", "m-2", "m-1"]) {
          const h = headers();
          h.set("Nats-Msg-Id", id);
          h.set("Nats-Expected-Stream", log.stream);
          const reply = await nc.request(subject, new Uint8Array([1]), { headers: h, timeout: 5000 });
          const parsed = parsePubAck(reply.data);
          // Undefined here means every ack of this server takes the slow path.
          assert.ok(parsed, `the server's ack ${JSON.stringify(reply.string())} was not read`);
          const json = reply.json<{ stream: string; seq: number; duplicate?: boolean }>();
          assert.deepEqual(parsed, { ...json, duplicate: json.duplicate === true });
          assert.equal(parsed.stream, log.stream);
          seen.push({ seq: parsed.seq, duplicate: parsed.duplicate });
        }
        assert.deepEqual(seen, [
          { seq: 1, duplicate: false },
          { seq: 2, duplicate: false },
          { seq: 1, duplicate: true },
        ]);
      } finally {
        await nc.close();
        await log.close();
      }
    } finally {
      await server.close();
    }
  });
});
