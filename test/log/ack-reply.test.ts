/**
 * The reply subject of a JetStream message, read in place: stream and
 * consumer sequences, the stream time and what is pending, in both forms
 * of the subject, against what the library's own parse gives.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ackReply } from "../../src/log/ack-reply.js";
import { seededRng } from "../../src/sim/rng.js";

describe("a JetStream reply subject", () => {
  it("gives the sequences, whole milliseconds and pending count in the 9-token form and the domain form", () => {
    const rng = seededRng(7);
    for (let i = 0; i < 2000; i++) {
      const nanos = BigInt(Math.floor(rng() * 2e12)) * 1_000_000n + BigInt(Math.floor(rng() * 1e6));
      const seq = Math.floor(rng() * 1e12) + 1;
      const cseq = Math.floor(rng() * 1e9) + 1;
      const pending = Math.floor(rng() * 1e6);
      const want = { streamSeq: seq, consumerSeq: cseq, timeMs: Number(nanos / 1_000_000n), pending };
      for (const reply of [
        `$JS.ACK.LLMGW.llmgw_catchup_x.1.${seq}.${cseq}.${nanos}.${pending}`,
        `$JS.ACK._.ACCHASH.LLMGW.oc_1.3.${seq}.${cseq}.${nanos}.${pending}`,
        `$JS.ACK.hub.ACCHASH.LLMGW.oc_1.1.${seq}.${cseq}.${nanos}.${pending}.rAnD0m`,
      ]) {
        assert.deepEqual(ackReply(reply), want, reply);
      }
    }
  });

  it("is refused, not guessed, in any other form", () => {
    for (const reply of [
      "",
      "_INBOX.abc.1",
      "$JS.ACK.a.b",
      "$JS.ACK.S.C.1.2.3.4",
      "$JS.ACK.S.C.1.2.3.4.5.6",
      "$JS.ACK.S.C.1.x2.3.4.5",
      "$JS.ACK.S.C.1.2..4.5",
      "$JS.ACK.S.C.1.2.3.4.",
      "$JS.NAK.S.C.1.2.3.4.5",
      "$JS.ACK.S.C.1.2.3.x4.5",
    ]) {
      assert.equal(ackReply(reply), undefined, JSON.stringify(reply));
    }
  });
});
