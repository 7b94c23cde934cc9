/**
 * The log's event encoder against protobuf-es's own `toBinary`: the same
 * bytes for random events of every kind, with every field type events use at
 * its edges (empty, zero, negative, 64-bit extremes, non-ASCII, lone
 * surrogates, long strings whose length takes two bytes, maps, packed
 * lists), and `toBinary`'s outcome where it falls back.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, type DescField, type DescMessage, ScalarType, toBinary } from "@bufbuild/protobuf";
import { type Event, EventSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import { compileEncoder } from "../../src/log/binary-encoder.js";
import { decodeEvent, EVENT_KINDS, encodeEvent } from "../../src/log/index.js";
import { type Rng, seededRng } from "../../src/sim/rng.js";

const encode = compileEncoder(EventSchema);

const STRINGS = ["", "a", "gpu-00017", "r-0001-s0-3", "x".repeat(127), "y".repeat(128), "z".repeat(300)];
const ODD_STRINGS = [
  "ünïcödé",
  "模型",
  "🚀 emoji",
  "lone \ud800 surrogate",
  "\u0000nul",
  `${"a".repeat(126)}é`,
];

function pick<T>(rng: Rng, xs: readonly T[]): T {
  return xs[Math.floor(rng() * xs.length)] as T;
}

function scalar(rng: Rng, t: ScalarType): unknown {
  switch (t) {
    case ScalarType.STRING:
      return rng() < 0.2 ? pick(rng, ODD_STRINGS) : pick(rng, STRINGS);
    case ScalarType.BOOL:
      return rng() < 0.5;
    case ScalarType.INT32:
      return pick(rng, [0, 1, -1, 127, 128, 300, -2147483648, 2147483647, Math.floor(rng() * 1e6) - 5e5]);
    case ScalarType.UINT32:
      return pick(rng, [0, 1, 127, 128, 16_383, 16_384, 4294967295, Math.floor(rng() * 1e9)]);
    case ScalarType.INT64:
      return pick(rng, [0n, 1n, -1n, 2n ** 32n, -(2n ** 63n), 2n ** 63n - 1n, BigInt(Date.now())]);
    case ScalarType.UINT64:
      return pick(rng, [0n, 1n, 127n, 2n ** 32n - 1n, 2n ** 32n, 2n ** 64n - 1n, 81_920n]);
    case ScalarType.DOUBLE:
      return pick(rng, [0, -0, 1.5, -2.25, Number.NaN, Number.POSITIVE_INFINITY, 1e-300, rng()]);
    default:
      throw new Error(`no generator for scalar type ${t}`);
  }
}

function fieldValue(rng: Rng, f: DescField, depth: number): unknown {
  switch (f.fieldKind) {
    case "scalar":
      return scalar(rng, f.scalar);
    case "enum":
      return rng() < 0.1 ? 99 : pick(rng, f.enum.values).number;
    case "message":
      return message(rng, f.message, depth + 1);
    case "list": {
      const n = Math.floor(rng() * 4);
      return Array.from({ length: n }, () =>
        f.listKind === "message"
          ? message(rng, f.message, depth + 1)
          : f.listKind === "enum"
            ? pick(rng, f.enum.values).number
            : scalar(rng, f.scalar),
      );
    }
    case "map": {
      const out: Record<string, unknown> = {};
      for (let i = Math.floor(rng() * 4); i > 0; i--) {
        out[pick(rng, ["", "a", "1", "10", "zone", "ü"])] =
          f.mapKind === "message"
            ? message(rng, f.message, depth + 1)
            : f.mapKind === "enum"
              ? pick(rng, f.enum.values).number
              : scalar(rng, f.scalar);
      }
      return out;
    }
    default: {
      const never: never = f;
      throw new Error(`unknown field ${String(never)}`);
    }
  }
}

/** A random message: each field set with some chance; one member of each oneof. */
function message(rng: Rng, desc: DescMessage, depth: number, forceCase?: string): Record<string, unknown> {
  const m = create(desc) as unknown as Record<string, unknown>;
  if (depth > 5) return m;
  for (const f of desc.fields) {
    if (f.oneof) continue;
    if (rng() < 0.6) m[f.localName] = fieldValue(rng, f, depth);
  }
  for (const o of desc.oneofs) {
    const member = forceCase ? o.fields.find((f) => f.localName === forceCase) : pick(rng, o.fields);
    if (member && (forceCase || rng() < 0.8))
      m[o.localName] = { case: member.localName, value: fieldValue(rng, member, depth) };
  }
  return m;
}

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
});
