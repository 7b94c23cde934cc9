/**
 * The log's event encoder against protobuf-es's own `toBinary`: the same
 * bytes for random events of every kind, with every field type events use at
 * its edges (empty, zero, negative, 64-bit extremes, non-ASCII, lone
 * surrogates, long strings whose length takes two bytes, maps, packed
 * lists), and `toBinary`'s outcome where it falls back.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, toBinary } from "@bufbuild/protobuf";
import { compileEncoder } from "../../src/codec/binary-encoder.js";
import { EVENT_KINDS, encodeEvent } from "../../src/codec/index.js";
import { type Event, EventSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import { decodeEvent } from "../../src/log/index.js";
import { seededRng } from "../../src/sim/rng.js";
import { randomMessage as message } from "../support/random-messages.js";

const encode = compileEncoder(EventSchema);

function sameBytes(e: Event, why: string): void {
  assert.deepEqual(encode(e), toBinary(EventSchema, e), why);
}

describe("event encoder", () => {
  it("writes toBinary's bytes for random events of every kind", () => {
    const rng = seededRng(20261202);
    let n = 0;
    for (const kind of EVENT_KINDS) {
      for (let i = 0; i < 60; i++) {
        const e = message(rng, EventSchema, 0, kind) as unknown as Event;
        sameBytes(e, `${kind} #${i}`);
        n++;
      }
    }
    for (let i = 0; i < 500; i++) sameBytes(message(rng, EventSchema, 0) as unknown as Event, `random #${i}`);
    assert.ok(n >= EVENT_KINDS.length * 60);
    assert.equal(encode.fallbacks, 0, "every one of them written by the encoder itself");
  });

  it("is what encodeEvent writes, and decodes back to the same event", () => {
    const rng = seededRng(7);
    for (let i = 0; i < 200; i++) {
      const e = message(rng, EventSchema, 0) as unknown as Event;
      e.id = `evt-${i}`;
      const bytes = encodeEvent(e);
      assert.deepEqual(bytes, toBinary(EventSchema, e));
      assert.deepEqual(encodeEvent(decodeEvent(bytes)), bytes);
    }
  });

  it("hands out messages that later ones leave alone (small ones share a slab, large ones do not)", () => {
    const rng = seededRng(11);
    const events = Array.from({ length: 3_000 }, (_, i) => {
      const e = message(rng, EventSchema, 0) as unknown as Event;
      e.id = `evt-${i}`;
      return e;
    });
    // Enough to fill several slabs, with a message too large for one in between.
    const large = create(EventSchema, { id: "large", writer: { id: "w".repeat(10_000) } });
    const held = events.map((e, i) => (i === 1_500 ? encode(large) : encode(e)));
    for (const [i, e] of events.entries()) {
      assert.deepEqual(
        held[i],
        toBinary(EventSchema, i === 1_500 ? large : e),
        `message ${i}, read after all were encoded`,
      );
    }
    assert.equal(
      held[1_500]!.buffer.byteLength,
      held[1_500]!.byteLength,
      "a large message has a buffer of its own",
    );
  });

  it("writes 64-bit values at every varint length and at the edges of their halves", () => {
    const values = [0n, 1n, 127n, 128n, 2n ** 31n - 1n, 2n ** 31n, 2n ** 32n - 1n, 2n ** 32n, 2n ** 32n + 1n];
    for (let bits = 33n; bits <= 64n; bits++) values.push(2n ** (bits - 1n), 2n ** bits - 1n);
    values.push(1_780_000_000_123n, 2n ** 53n - 1n, 2n ** 53n, 2n ** 53n + 1n, -1n, -(2n ** 63n));
    for (const v of values) {
      if (v < 2n ** 63n) sameBytes(create(EventSchema, { id: "t", timeUnixMs: v }), `time ${v}`);
      const seq = BigInt.asUintN(64, v);
      sameBytes(
        create(EventSchema, {
          id: "s",
          body: { case: "shardStatus", value: { nodeId: "n", sessionSeq: seq } },
        }),
        `sequence ${seq}`,
      );
    }
  });

  it("writes an event whose nested lengths take two bytes across the end of a slab", () => {
    // Events of ~1.2 KB, their status sub-message over 127 bytes: across
    // 64 KiB slabs some are begun in one slab and finished in the next.
    const events = Array.from({ length: 300 }, (_, i) =>
      create(EventSchema, {
        id: `cross-${i}`,
        body: {
          case: "shardStatus",
          value: {
            nodeId: "n".repeat(900 + (i % 7)),
            status: { replicaId: "r".repeat(150 + i), shardId: `s-${i}`, error: "e".repeat(40 + (i % 13)) },
          },
        },
      }),
    );
    const held = events.map((e) => encode(e));
    for (const [i, e] of events.entries()) assert.deepEqual(held[i], toBinary(EventSchema, e), `event ${i}`);
  });

  it("grows its buffer for a large event and writes a small one correctly after", () => {
    const big = create(EventSchema, {
      id: "big",
      body: {
        case: "shardStatus",
        value: { nodeId: "n".repeat(3_000_000), status: { replicaId: "r", shardId: "é".repeat(100_000) } },
      },
    });
    sameBytes(big, "3 MB event");
    sameBytes(create(EventSchema, { id: "small", writer: { id: "gw" } }), "small after big");
  });

  it("falls back to toBinary for unknown fields kept from a newer writer, and for values toBinary refuses", () => {
    const withUnknown = create(EventSchema, { id: "u" });
    withUnknown.$unknown = [{ no: 999, wireType: 2, data: new Uint8Array([3, 97, 98, 99]) }];
    const before = encode.fallbacks;
    sameBytes(withUnknown, "unknown fields");
    assert.equal(encode.fallbacks, before + 1);
    const bad = create(EventSchema, {
      id: "bad",
      body: { case: "shardStatus", value: { nodeId: "n", sessionSeq: 5n } },
    });
    (bad.body.value as { sessionSeq: unknown }).sessionSeq = -1n; // out of range for a uint64
    assert.throws(() => toBinary(EventSchema, bad));
    assert.throws(() => encode(bad), /cannot encode field/);
  });

  it("names each generated writer in stack traces by its message type and source URL", () => {
    const e = create(EventSchema, { id: "named" });
    Object.defineProperty(e, "id", {
      get() {
        throw new Error("a getter that throws");
      },
    });
    const err = (() => {
      try {
        encode(e);
      } catch (caught) {
        return caught as Error;
      }
      assert.fail("the getter's error is passed on");
    })();
    assert.match(
      err.stack ?? "",
      /at \S*write_llmgw_v1_Event\b.*\(llmgw-codec\/encode\/llmgw\.v1\.Event\.js:\d+:\d+\)/,
    );
  });

  it("keeps each encoder's messages apart from another's (each writes into its own slab)", () => {
    const other = compileEncoder(EventSchema);
    const a = create(EventSchema, {
      id: "from-a",
      body: { case: "gatewayStarted", value: { gatewayId: "gw-a" } },
    });
    const b = create(EventSchema, {
      id: "from-b",
      body: { case: "gatewayStarted", value: { gatewayId: "gw-b" } },
    });
    const fromA = encode(a);
    const fromB = other(b);
    assert.notEqual(fromA.buffer, fromB.buffer);
    assert.deepEqual(decodeEvent(fromA).id, "from-a");
    assert.deepEqual(decodeEvent(fromB).id, "from-b");
  });
});
