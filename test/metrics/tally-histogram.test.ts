/**
 * The tallied histogram against prom-client's own: the same exposition for
 * the same observations, so a scrape cannot tell them apart. It is registered
 * into prom-client's registry by a cast (prom-client has no interface for a
 * metric of one's own), so every path by which the registry reads a metric is
 * compared here: a prom-client upgrade that reads metrics differently fails
 * these tests instead of breaking the gateway's /metrics.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Histogram, type OpenMetricsContentType, Registry } from "prom-client";
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

  it("reads the same through every other path of the registry: OpenMetrics, default labels, one metric, merged, removed", async () => {
    const values = [0.0003, 0.002, 0.002, 0.7, 3, 42];
    const feed = (h: { observe(v: number): void }) => {
      for (const v of values) h.observe(v);
    };
    // OpenMetrics (exemplars and the trailing # EOF are its own).
    const [omTheirs, omOurs] = [
      new Registry<OpenMetricsContentType>(),
      new Registry<OpenMetricsContentType>(),
    ];
    for (const r of [omTheirs, omOurs]) r.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
    feed(new Histogram({ name: "x_seconds", help: "how long", buckets: BUCKETS, registers: [omTheirs] }));
    feed(new TallyHistogram("x_seconds", "how long", BUCKETS, omOurs));
    assert.match(await omOurs.metrics(), /# EOF/);
    assert.equal(await omOurs.metrics(), await omTheirs.metrics(), "OpenMetrics");

    // Default labels, added by the registry to each value.
    const dl = pair();
    for (const r of [dl.ours, dl.theirs]) r.setDefaultLabels({ gateway: "gw-1" });
    feed(dl.h);
    feed(dl.t);
    assert.equal(await dl.ours.metrics(), await dl.theirs.metrics(), "default labels");
    assert.match(await dl.ours.metrics(), /^x_seconds_bucket\{le="\+Inf",gateway="gw-1"\} 6$/m);

    // One metric by name, as a string and as the object.
    const one = pair();
    feed(one.h);
    feed(one.t);
    assert.equal(
      await one.ours.getSingleMetricAsString("x_seconds"),
      await one.theirs.getSingleMetricAsString("x_seconds"),
    );
    assert.equal(one.ours.getSingleMetric("x_seconds") as unknown, one.t);

    // Merged into one registry with others' metrics.
    const other = new Registry();
    new Histogram({ name: "y_seconds", help: "other", buckets: [1], registers: [other] }).observe(2);
    assert.equal(
      await Registry.merge([one.ours, other]).metrics(),
      await Registry.merge([one.theirs, other]).metrics(),
      "merged",
    );

    // Removed: gone from the exposition, and a new one can take its name.
    one.ours.removeSingleMetric("x_seconds");
    assert.equal(await one.ours.metrics(), "\n");
    const again = new TallyHistogram("x_seconds", "how long", BUCKETS, one.ours);
    again.observe(1);
    assert.match(await one.ours.metrics(), /^x_seconds_count 1$/m);
  });

  it("is refused by the registry like prom-client's own when its name is taken", () => {
    const registry = new Registry();
    new Histogram({ name: "x_seconds", help: "how long", buckets: BUCKETS, registers: [registry] });
    assert.throws(
      () => new TallyHistogram("x_seconds", "how long", BUCKETS, registry),
      /A metric with the name x_seconds has already been registered/,
    );
  });
});
