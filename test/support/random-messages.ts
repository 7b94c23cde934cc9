/**
 * Random protobuf messages generated from a schema's descriptors (src/gen):
 * every field set with some chance, one member of each oneof, every field
 * type events use at its edges (empty, zero, negative, 64-bit extremes,
 * non-ASCII, lone surrogates, long strings whose length takes two bytes,
 * maps, packed lists). A field added to the proto is generated at once.
 * Used to compare the log's encoder and decoder with protobuf-es's own.
 */
import { create, type DescField, type DescMessage, ScalarType } from "@bufbuild/protobuf";
import type { Rng } from "../../src/sim/rng.js";

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
    case ScalarType.BYTES:
      return pick(rng, [
        new Uint8Array(0),
        new TextEncoder().encode("engine output\n"),
        new Uint8Array([0, 0xff, 0x1b, 0x0a, 0xc3]),
        new Uint8Array(300).fill(0x78),
      ]);
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
      return randomMessage(rng, f.message, depth + 1);
    case "list": {
      const n = Math.floor(rng() * 4);
      return Array.from({ length: n }, () =>
        f.listKind === "message"
          ? randomMessage(rng, f.message, depth + 1)
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
            ? randomMessage(rng, f.message, depth + 1)
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
export function randomMessage(
  rng: Rng,
  desc: DescMessage,
  depth: number,
  forceCase?: string,
): Record<string, unknown> {
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
