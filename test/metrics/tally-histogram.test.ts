/**
 * The tallied histogram against prom-client's own: the same exposition
 * (text and JSON) for the same observations, so a scrape cannot tell them apart.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Histogram, Registry } from "prom-client";
import { TallyHistogram } from "../../src/metrics-endpoint/index.js";
import { seededRng } from "../../src/sim/rng.js";

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

function pair() {
  const theirs = new Registry();
  const ours = new Registry();
  const h = new Histogram({ name: "x_seconds", help: "how long", buckets: BUCKETS, registers: [theirs] });
  const t = new TallyHistogram("x_seconds", "how long", BUCKETS, ours);
  return { theirs, ours, h, t };
}

describe("tallied histogram", () => {
  it("exposes what prom-client's Histogram exposes for the same values, bounds and edges included", async () => {
    const { theirs, ours, h, t } = pair();
    assert.equal(await ours.metrics(), await theirs.metrics(), "empty");
    const rng = seededRng(17);
    const values = [0, 0.0005, 0.001, 10, 10.5, 1e9, ...Array.from({ length: 2_000 }, () => rng() ** 4 * 12)];
    for (const v of values) {
      h.observe(v);
      t.observe(v);
    }
    assert.equal(await ours.metrics(), await theirs.metrics());
    assert.deepEqual(await ours.getMetricsAsJSON(), await theirs.getMetricsAsJSON());
    // After a reset it shows zeros, as a new one does (prom-client's shows no series until the next value).
    ours.resetMetrics();
    assert.equal(await ours.metrics(), await pair().theirs.metrics(), "after a reset");
  });

  it("refuses a value that is not a finite number, and buckets that are not distinct finite numbers", () => {
    const { t } = pair();
    assert.throws(() => t.observe(Number.NaN), /not a finite number/);
    assert.throws(() => t.observe(Number.POSITIVE_INFINITY), /not a finite number/);
    assert.throws(() => new TallyHistogram("y", "y", [1, 1], new Registry()), /distinct finite/);
    assert.throws(
      () => new TallyHistogram("z", "z", [1, Number.POSITIVE_INFINITY], new Registry()),
      /distinct finite/,
    );
  });
});
