/**
 * The log's event decoder against protobuf-es's own `fromBinary`: the same
 * messages for random events of every kind (generated from the schema's
 * descriptors, so a new field or kind is covered at once), for every event
 * of the golden log (including its event of a kind from a future version),
 * for wire forms other writers may use (fields out of order, packed lists
 * unpacked, a message field repeated), and the same error for bytes that are
 * not an event.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter } from "@bufbuild/protobuf/wire";
import { compileDecoder } from "../../src/codec/binary-decoder.js";
import { EVENT_KINDS, encodeEvent } from "../../src/codec/index.js";
import { type AgentMessage, AgentMessageSchema } from "../../src/gen/llmgw/v1/agent_pb.js";
import { type Event, EventSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import { decodeEvent } from "../../src/log/index.js";
import { seededRng } from "../../src/sim/rng.js";
import { readGoldenLog } from "../support/golden-log.js";
import { randomMessage } from "../support/random-messages.js";

const decode = compileDecoder(EventSchema);

function same(bytes: Uint8Array, why: string): Event {
  const want = fromBinary(EventSchema, bytes);
  const got = decode(bytes);
  assert.deepStrictEqual(got, want, why);
  // As a NATS message's data holds them: a Buffer, a view into a larger one (its strings are made by the Buffer).
  const framed = Buffer.concat([Buffer.from([1, 2, 3]), bytes, Buffer.from([4])]).subarray(
    3,
    3 + bytes.length,
  );
  assert.deepStrictEqual(decode(framed), fromBinary(EventSchema, framed), `${why}, from a Buffer`);
  return got;
}

describe("event decoder", () => {
  it("reads what fromBinary reads for random events of every kind", () => {
    const rng = seededRng(20261204);
    const before = decode.fallbacks;
    let n = 0;
    for (const kind of EVENT_KINDS) {
      for (let i = 0; i < 60; i++) {
        const e = randomMessage(rng, EventSchema, 0, kind) as unknown as Event;
        const got = same(toBinary(EventSchema, e), `${kind} #${i}`);
        assert.equal(got.body.case, kind);
        n++;
      }
    }
    for (let i = 0; i < 500; i++) {
      same(toBinary(EventSchema, randomMessage(rng, EventSchema, 0) as unknown as Event), `random #${i}`);
    }
    assert.ok(n >= EVENT_KINDS.length * 60);
    assert.equal(decode.fallbacks, before, "every one of them read by the decoder itself");
  });

  it("reads what fromBinary reads for random agent messages (the gateway decodes each agent's stream with it)", () => {
    const decodeAgent = compileDecoder(AgentMessageSchema);
    const rng = seededRng(20261205);
    const cases = new Set<string | undefined>();
    for (let i = 0; i < 2_000; i++) {
      const m = randomMessage(rng, AgentMessageSchema, 0) as unknown as AgentMessage;
      const bytes = toBinary(AgentMessageSchema, m);
      const got = decodeAgent(bytes);
      assert.deepStrictEqual(got, fromBinary(AgentMessageSchema, bytes), `agent message #${i}`);
      cases.add(got.msg.case);
    }
    assert.ok(cases.size >= 4, `several kinds of agent message among them: ${[...cases].join(", ")}`);
    assert.equal(decodeAgent.fallbacks, 0, "every one of them read by the decoder itself");
    // Bytes an agent may send that are not a message, or are a cut or damaged one: what fromBinary does, error for error.
    const outcome = (f: () => unknown) => {
      try {
        return { ok: f() };
      } catch (err) {
        return { err: String(err) };
      }
    };
    const int = (n: number) => Math.floor(rng() * n);
    for (let i = 0; i < 3_000; i++) {
      const good = toBinary(
        AgentMessageSchema,
        randomMessage(rng, AgentMessageSchema, 0) as unknown as AgentMessage,
      );
      const bytes =
        i % 3 === 0
          ? Uint8Array.from({ length: 1 + int(40) }, () => int(256))
          : i % 3 === 1
            ? good.subarray(0, int(good.length + 1))
            : good.map((b, j) => (j === int(good.length) ? int(256) : b));
      assert.deepStrictEqual(
        outcome(() => decodeAgent(bytes)),
        outcome(() => fromBinary(AgentMessageSchema, bytes)),
        `damaged agent message #${i}: ${Buffer.from(bytes).toString("hex")}`,
      );
    }
  });

  it("reads every event of the golden log as fromBinary does, the future kind included", () => {
    const records = readGoldenLog();
    assert.ok(records.length > 50);
    let unknownKinds = 0;
    for (const [i, r] of records.entries()) {
      const got = same(r.data, `golden record ${i} (${r.subject})`);
      assert.deepStrictEqual(decodeEvent(r.data, i + 1), got);
      if (got.body.case === undefined) {
        unknownKinds++;
        assert.ok((got.$unknown?.length ?? 0) > 0, "the future kind is kept as an unknown field");
      }
    }
    assert.equal(unknownKinds, 1, "the golden log holds one event of a kind from a future version");
  });

  it("keeps unknown fields of a newer writer, at the top and inside a body, as fromBinary does", () => {
    const e = create(EventSchema, {
      id: "u",
      timeUnixMs: 1_700_000_000_000n,
      body: { case: "shardStatus", value: { nodeId: "n", status: { replicaId: "r", shardId: "r.0" } } },
    });
    e.$unknown = [{ no: 999, wireType: 2, data: new Uint8Array([3, 97, 98, 99]) }];
    const value = e.body.value as { $unknown?: unknown };
    value.$unknown = [{ no: 77, wireType: 0, data: new Uint8Array([5]) }];
    const before = decode.fallbacks;
    const got = same(toBinary(EventSchema, e), "unknown fields");
    assert.equal(got.$unknown?.[0]?.no, 999);
    assert.equal(decode.fallbacks, before + 2, "handed to fromBinary (from its bytes, then from a Buffer)");
    assert.deepStrictEqual(encodeEvent(got), toBinary(EventSchema, e), "written back as read");
  });

  it("reads other wire forms as fromBinary does: fields out of order, lists unpacked, a message repeated", () => {
    // A usage event with its packed list written unpacked and its fields in reverse order.
    const w = new BinaryWriter();
    w.tag(13, 2).fork();
    for (const mb of [81_920n, 0n, 2n ** 40n]) w.tag(4, 0).uint64(mb); // gpu_memory_used_mb, unpacked
    w.tag(3, 0).uint64(7n); // session_seq
    w.tag(1, 2).string("gpu-0001"); // node_id
    w.join();
    w.tag(2, 0).int64(1_700_000_000_123n);
    w.tag(1, 2).string("evt-1");
    same(w.finish(), "reordered and unpacked");

    // The writer field twice: fromBinary merges the two.
    const twice = new BinaryWriter();
    twice.tag(1, 2).string("evt-2");
    twice.tag(3, 2).fork().tag(2, 2).string("gw-1").join(); // writer.id
    twice.tag(3, 2).fork().tag(1, 0).int32(1).join(); // writer.kind
    same(twice.finish(), "a message field repeated");

    // A oneof member twice, and then another member: the last one wins.
    const cases = new BinaryWriter();
    cases.tag(1, 2).string("evt-3");
    cases.tag(14, 2).fork().tag(1, 2).string("a").join();
    cases.tag(14, 2).fork().tag(1, 2).string("b").join();
    cases.tag(16, 2).fork().tag(1, 2).string("gw").join();
    same(cases.finish(), "oneof members in turn");
  });

  it("fails on bytes that are not an event exactly as fromBinary does", () => {
    const good = encodeEvent(
      create(EventSchema, {
        id: "evt",
        body: { case: "gatewayStarted", value: { gatewayId: "gw-1" } },
      }),
    );
    for (const bad of [
      good.subarray(0, good.length - 1),
      good.subarray(0, 3),
      Uint8Array.from([0x0a, 0x7f, 0x61]),
      Uint8Array.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
      Uint8Array.from([0x08 | 7]),
      Uint8Array.from([0x0a, 0x02, 0xff, 0xfe]),
    ]) {
      let expected: unknown;
      try {
        expected = fromBinary(EventSchema, bad);
      } catch (err) {
        expected = err;
      }
      if (expected instanceof Error) {
        assert.throws(() => decode(bad), { message: expected.message }, `bytes ${Array.from(bad)}`);
      } else {
        assert.deepStrictEqual(decode(bad), expected, `bytes ${Array.from(bad)}`);
      }
    }
  });

  it("names each generated reader in stack traces by its message type and source URL", () => {
    const bytes = encodeEvent(create(EventSchema, { id: "named" }));
    /** Bytes whose length may be read once (by the caller); the generated reader's read of it throws. */
    class Trap extends Uint8Array {
      #reads = 0;
      override get length(): number {
        if (++this.#reads > 1) throw new Error("a length read that throws");
        return super.length;
      }
    }
    const err = (() => {
      try {
        decode(new Trap(bytes));
      } catch (caught) {
        return caught as Error;
      }
      assert.fail("the error is passed on");
    })();
    assert.match(
      err.stack ?? "",
      /at \S*read_llmgw_v1_Event\b.*\(llmgw-codec\/decode\/llmgw\.v1\.Event\.js:\d+:\d+\)/,
    );
  });
});
