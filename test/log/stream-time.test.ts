/**
 * The stream time the reader gives each record: the milliseconds of the
 * JetStream reply subject's nanoseconds, exactly as the library's BigInt
 * would give them, in both forms of the subject, and the library's own
 * answer for anything else.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { JsMsg } from "@nats-io/jetstream";
import { streamTimeMs } from "../../src/log/reader.js";
import { seededRng } from "../../src/sim/rng.js";

function msg(reply: string, nanos: bigint): JsMsg {
  return { reply, timestampNanos: nanos } as unknown as JsMsg;
}

describe("stream time of a delivered message", () => {
  it("is the reply subject's nanoseconds in whole milliseconds, rounded down, in both subject forms", () => {
    const rng = seededRng(42);
    const edges = [0n, 1n, 999_999n, 1_000_000n, 1_733_313_923_000_000_000n, 1_733_313_923_999_999_999n];
    const random = Array.from(
      { length: 2000 },
      () => BigInt(Math.floor(rng() * 2e12)) * 1_000_000n + BigInt(Math.floor(rng() * 1e6)),
    );
    for (const nanos of [...edges, ...random]) {
      const exact = Number(nanos / 1_000_000n);
      const old = `$JS.ACK.LLMGW.oc_1.1.${nanos % 977n}.12.${nanos}.7`;
      const withDomain = `$JS.ACK._.ACCHASH.LLMGW.oc_1.1.42.12.${nanos}.7.rAnD0m`;
      assert.equal(streamTimeMs(msg(old, nanos)), exact, old);
      assert.equal(streamTimeMs(msg(withDomain, nanos)), exact, withDomain);
    }
  });

  it("asks the library for a subject of another form", () => {
    const nanos = 1_733_313_923_123_456_789n;
    for (const reply of ["", "inbox.1", "$JS.ACK.a.b", `$JS.ACK.S.C.1.2.3.x${nanos}.0`]) {
      assert.equal(streamTimeMs(msg(reply, nanos)), 1_733_313_923_123, JSON.stringify(reply));
    }
  });
});
