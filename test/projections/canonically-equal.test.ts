/**
 * `canonicallyEqual` answers exactly what comparing two `canonicalJson`
 * texts answers (the replay-determinism rule relies on it): on values JSON
 * reads oddly, on random trees with their keys in different orders, and on
 * two folds of a real fleet, equal and then differing.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  canonicalJson,
  canonicallyEqual,
  evolveFleet,
  type FleetState,
  initialFleet,
} from "../../src/projections/index.js";
import { seededRng } from "../../src/sim/rng.js";
import { Fleet, llama8b, llama70b, llama405b } from "../support/fleet.js";

function agrees(a: unknown, b: unknown, what: string): void {
  const texts = canonicalJson(a) === canonicalJson(b);
  assert.equal(canonicallyEqual(a, b), texts, `${what}: ${canonicalJson(a)} vs ${canonicalJson(b)}`);
  assert.equal(canonicallyEqual(b, a), texts, `${what} (swapped)`);
}

describe("canonicallyEqual", () => {
  it("agrees with the canonical texts on what JSON reads oddly", () => {
    const withJson = (v: unknown) => ({ toJSON: () => v });
    const cases: Array<[unknown, unknown, string]> = [
      [{ a: 1, b: 2 }, { b: 2, a: 1 }, "key order"],
      [{ a: 1, b: undefined }, { a: 1 }, "an undefined value is absent"],
      [{ a: 1, f: () => 1 }, { a: 1 }, "a function is absent"],
      [{ a: 1, s: Symbol("x") }, { a: 1, s: undefined }, "a symbol is absent"],
      [[undefined], [null], "undefined in an array is null"],
      [[() => 1], [null], "a function in an array is null"],
      [[Number.NaN, Number.POSITIVE_INFINITY], [null, null], "not finite is null"],
      [{ n: -0 }, { n: 0 }, "-0 is 0"],
      [{ n: 1 }, { n: "1" }, "a number is not its string"],
      [{ n: null }, { n: undefined }, "null is not absent"],
      [[1, 2], [2, 1], "array order counts"],
      [[1, 2], { 0: 1, 1: 2 }, "an array is not an object"],
      [new Map([["a", 1]]), {}, "a Map writes as {}"],
      [withJson({ x: 1 }), { x: 1 }, "toJSON's form"],
      [withJson(withJson(2)), 2, "toJSON of toJSON"],
      [{ t: withJson(undefined) }, {}, "a toJSON giving undefined is absent"],
      [undefined, undefined, "both undefined at the top"],
      [undefined, null, "undefined at the top is not null"],
      [{ a: { b: [1, { c: "x" }] } }, { a: { b: [1, { c: "y" }] } }, "deep difference"],
      [{ a: { b: [1, { c: "x" }] } }, { a: { b: [1, { c: "x" }] } }, "deep equality"],
      [{ a: 1 }, { a: 1, b: 2 }, "an extra key"],
      [{ a: 1, b: 2 }, { a: 1, c: 2 }, "another key"],
      [Object.assign(Object.create({ inherited: 1 }), { a: 1 }), { a: 1 }, "inherited keys are not written"],
    ];
    for (const [a, b, what] of cases) agrees(a, b, what);
    assert.throws(() => canonicallyEqual({ n: 1n }, { n: 1n }), TypeError);
  });

  it("agrees with the canonical texts on random trees", () => {
    const rng = seededRng(7);
    const pick = <T>(xs: T[]): T => xs[Math.floor(rng() * xs.length)] as T;
    const leaf = () => pick<unknown>([0, 1, -0, 2.5, Number.NaN, "a", "b", "", true, false, null, undefined]);
    const tree = (depth: number): unknown => {
      const r = rng();
      if (depth === 0 || r < 0.4) return leaf();
      if (r < 0.7) return Array.from({ length: Math.floor(rng() * 3) }, () => tree(depth - 1));
      const out: Record<string, unknown> = {};
      for (const k of ["x", "y", "z", "1"]) if (rng() < 0.6) out[k] = tree(depth - 1);
      return out;
    };
    /** The same tree with each object's keys in reverse order, and maybe one leaf changed. */
    const copy = (v: unknown, change: { left: number }): unknown => {
      if (Array.isArray(v)) return v.map((x) => copy(x, change));
      if (v !== null && typeof v === "object") {
        const out: Record<string, unknown> = {};
        for (const k of Object.keys(v).reverse()) out[k] = copy((v as Record<string, unknown>)[k], change);
        return out;
      }
      return change.left-- === 0 ? leaf() : v;
    };
    let equal = 0;
    for (let i = 0; i < 2000; i++) {
      const a = tree(4);
      const b = copy(a, { left: i % 2 === 0 ? -1 : Math.floor(rng() * 8) });
      agrees(a, b, `tree ${i}`);
      if (canonicalJson(a) === canonicalJson(b)) equal++;
    }
    assert.ok(equal > 1000 && equal < 2000, `both answers were tried (${equal} of 2000 equal)`);
  });

  it("finds two folds of a fleet equal, and one event apart different", () => {
    const f = new Fleet();
    for (const n of ["gpu-a1", "gpu-a2", "gpu-b1"]) f.connect(n);
    f.catalog(llama70b(2), llama8b(3), llama405b(1));
    f.run();
    f.usage("gpu-a1", [30, 40]);
    const fold = (upTo: number): FleetState => {
      let s = initialFleet();
      for (const e of f.events.slice(0, upTo)) s = evolveFleet(s, e.event, { seq: e.seq, timeMs: e.timeMs });
      return s;
    };
    const all = f.events.length;
    agrees(fold(all), fold(all), "the same log twice");
    assert.equal(canonicallyEqual(fold(all), fold(all)), true);
    agrees(fold(all - 1), fold(all), "one event short");
    assert.equal(canonicallyEqual(fold(all - 1), fold(all)), false);
  });
});
