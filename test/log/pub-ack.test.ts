import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parsePubAck } from "../../src/log/pub-ack.js";

const bytes = (s: string) => new TextEncoder().encode(s);

describe("parsePubAck (the common publish ack, read from its bytes)", () => {
  it("reads what JSON.parse reads from the acks nats-server writes", () => {
    for (const text of [
      '{"stream":"LLMGW","seq":1}',
      '{"stream":"INGEST_abc-1","seq":123456789}',
      '{"stream":"LLMGW","seq":42,"duplicate":true}',
      `{"stream":"S","seq":${Number.MAX_SAFE_INTEGER}}`,
    ]) {
      const json = JSON.parse(text) as { stream: string; seq: number; duplicate?: boolean };
      assert.deepEqual(parsePubAck(bytes(text)), { ...json, duplicate: json.duplicate === true }, text);
    }
  });

  it("leaves every other shape to the JSON parser", () => {
    for (const text of [
      "",
      '{"error":{"code":503,"err_code":10077,"description":"wrong last sequence"}}',
      '{"stream":"LLMGW","domain":"hub","seq":1}',
      '{"stream":"LLMGW","seq":1,"duplicate":false}',
      '{"stream":"LLMGW", "seq":1}',
      '{"stream":"","seq":1}',
      '{"stream":"LLMGW","seq":}',
      '{"stream":"LLMGW","seq":-1}',
      '{"stream":"LLMGW","seq":1.5}',
      '{"stream":"LLMGW","seq":1}x',
      '{"stream":"LLMGW","seq":12345678901234567}',
      '{"stream":"LLMGW","seq":9007199254740993}',
      '{"stream":"LL\\"MGW","seq":1}',
      '{"stream":"LLMGWé","seq":1}',
      '{"stream":"LLMGW"',
    ]) {
      assert.equal(parsePubAck(bytes(text)), undefined, text);
    }
  });
});
