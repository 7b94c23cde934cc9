import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { getTextEncoding } from "@bufbuild/protobuf/wire";
import { installFastTextEncoding } from "../../src/codec/text-encoding.js";
import { EventSchema, Writer_Kind } from "../../src/gen/llmgw/v1/events_pb.js";

describe("protobuf text encoding with a short-ASCII fast path", () => {
  installFastTextEncoding();
  const te = new TextEncoder();
  const samples = [
    "",
    "gpu-00001",
    "3f1c2a9e-8f5b-4d7e-9c1a-2b3c4d5e6f70-12345",
    "\u007f",
    "x".repeat(128),
    "y".repeat(129),
    `${"a".repeat(127)}é`,
    "Xid 79: GPU has fallen off the bus — node gpü-α",
    "emoji 🚀 at the end",
    "lone surrogate \ud800 in the middle",
    "\u0000nul first",
  ];

  it("writes the same bytes as the runtime's encoder, ASCII or not, short or long", () => {
    const enc = getTextEncoding();
    for (const s of samples) assert.deepEqual(enc.encodeUtf8(s), te.encode(s), JSON.stringify(s));
  });

  it("round-trips events whose strings are anything an agent may send", () => {
    for (const s of samples) {
      const e = create(EventSchema, {
        id: `e-${s.length}`,
        writer: { kind: Writer_Kind.GATEWAY, id: s },
        body: { case: "nodeCordoned", value: { nodeId: "gpu-a1", reason: s, operator: s } },
      });
      const back = fromBinary(EventSchema, toBinary(EventSchema, e));
      const expected = s.replace("\ud800", "\ufffd"); // what UTF-8 can carry of a lone surrogate
      assert.equal(back.writer?.id, expected);
      assert.ok(back.body.case === "nodeCordoned");
      assert.equal(back.body.value.reason, expected);
    }
  });
});
