import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { FitIndex } from "../../src/reconciler/placement/fit-index.js";
import type { NodeFit } from "../../src/reconciler/placement/index.js";

/** What a full scan gives: fitting positions by score (higher first), then position; reasons counted. */
function scan(fits: NodeFit[], k: number): { best: number[]; reasons: Record<string, number>; fit: number } {
  const ok = fits.flatMap((f, pos) => (f.ok ? [{ pos, score: f.score }] : []));
  ok.sort((a, b) => b.score - a.score || a.pos - b.pos);
  const reasons: Record<string, number> = {};
  for (const f of fits) if (!f.ok) reasons[f.reason] = (reasons[f.reason] ?? 0) + 1;
  return { best: ok.slice(0, k).map((x) => x.pos), reasons, fit: ok.length };
}

function fitOf(i: number, round: number): NodeFit {
  const h = (i * 7919 + round * 104_729) % 13;
  if (h < 3) return { ok: false, reason: h === 0 ? "too few free GPUs" : "cordoned" };
  return { ok: true, score: Math.round(((h % 5) / 4 - (h % 2)) * 10_000) / 10_000 };
}

describe("placement: the fit index", () => {
  it("given every node's fit, then as nodes change, answers the best nodes and the reason counts exactly as a full scan", () => {
    // Enough nodes for several summary words of the bit sets (1,024 positions each).
    const n = 2_100;
    const fits: NodeFit[] = [];
    const index = new FitIndex(n);
    for (let i = 0; i < n; i++) {
      fits[i] = fitOf(i, 0);
      index.set(i, 0, fits[i] as NodeFit);
    }
    for (let round = 1; round <= 50; round++) {
      const want = scan(fits, 4);
      assert.deepEqual(index.best(4), want.best, `round ${round}`);
      assert.deepEqual(Object.fromEntries(index.reasons), want.reasons);
      assert.equal(index.fitCount, want.fit);
      // The nodes a placement landed on change; nothing else does.
      for (const pos of [...want.best.slice(0, 1), (round * 37) % n, (round * 1_031) % n]) {
        fits[pos] = fitOf(pos, round);
        index.set(pos, round, fits[pos] as NodeFit);
      }
    }
    // Only the last nodes fit: found past the empty words.
    for (let i = 0; i < n - 40; i++) {
      fits[i] = { ok: false, reason: "too few free GPUs" };
      index.set(i, 98, fits[i] as NodeFit);
    }
    assert.deepEqual(index.best(4), scan(fits, 4).best);
    assert.ok((index.best(1)[0] as number) >= n - 40);
    for (let i = 0; i < n; i++) {
      fits[i] = { ok: false, reason: "too few free GPUs" };
      index.set(i, 99, fits[i] as NodeFit);
    }
    assert.deepEqual(index.best(4), []);
    assert.deepEqual(Object.fromEntries(index.reasons), { "too few free GPUs": n });
  });

  it("a copy changes without changing its original, and refuses to read an original changed under it", () => {
    const n = 100;
    const index = new FitIndex(n);
    for (let i = 0; i < n; i++) index.set(i, 0, fitOf(i, 0));
    const before = { best: index.best(10), reasons: [...index.reasons], fit: index.fitCount };
    const copy = index.copy();
    for (const pos of copy.best(5)) copy.set(pos, 1, { ok: false, reason: "too few free GPUs" });
    copy.set(99, 1, { ok: true, score: 5 });
    assert.deepEqual({ best: index.best(10), reasons: [...index.reasons], fit: index.fitCount }, before);
    assert.equal(copy.best(1)[0], 99);
    assert.equal(copy.fit(99)?.ok, true);
    assert.equal(index.fit(99)?.ok, true);
    assert.equal(copy.version(99), 1);
    assert.equal(index.version(99), 0);
    // A copy reads its original's fits (it keeps only its own writes): the original may not change under it.
    index.set(98, 1, { ok: true, score: 6 });
    assert.throws(() => copy.best(1), /changed while a copy of it was in use/);
    assert.deepEqual(index.best(1), [98]);
    // A new copy reads the original as it is now.
    assert.deepEqual(index.copy().best(1), [98]);
  });
});
