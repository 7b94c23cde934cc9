import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { headers } from "@nats-io/transport-node";
import { isLogError } from "../../src/log/index.js";
import { PublishHeaders } from "../../src/log/publish-headers.js";

/** What the client's own headers encode to, for the same values. */
function clientBytes(msgId: string, stream: string, last?: number): Uint8Array {
  const h = headers();
  h.set("Nats-Msg-Id", msgId);
  h.set("Nats-Expected-Stream", stream);
  if (last !== undefined) h.set("Nats-Expected-Last-Subject-Sequence", String(last));
  return (h as unknown as { encode(): Uint8Array }).encode();
}

describe("publish headers", () => {
  it("encode to the client's bytes, with and without the last-sequence fence", () => {
    const cases: Array<[string, string, number | undefined]> = [
      ["0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0-17", "LLMGW", undefined],
      ["s-1", "LLMGW_TEST_42", 0],
      ["gw-dev:7", "S", 123_456_789],
      ["ünïcödé-id", "LLMGW", 3],
    ];
    for (const [id, stream, last] of cases) {
      const ours = new PublishHeaders(id, stream, last);
      assert.deepEqual(ours.encode(), clientBytes(id, stream, last), `${id} ${stream} ${last}`);
      assert.equal(ours.get("Nats-Msg-Id"), id);
      assert.equal(ours.has("Nats-Expected-Last-Subject-Sequence"), last !== undefined);
      assert.deepEqual(
        [...ours].map(([k]) => k),
        ours.keys(),
      );
    }
  });

  it("refuses a value that would break the header block, as a LogError naming the header", () => {
    for (const bad of ["a\r\nInjected: x", "line\n", " padded", ""]) {
      assert.throws(
        () => new PublishHeaders(bad, "LLMGW"),
        (err: unknown) => isLogError(err, "invalid-argument") && /Nats-Msg-Id/.test((err as Error).message),
        JSON.stringify(bad),
      );
    }
    assert.throws(() => new PublishHeaders("ok", "LLMGW").set(), /read-only/);
  });
});
