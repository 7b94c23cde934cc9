import type { Histogram, Metric, Registry, RegistryContentType } from "prom-client";

/**
 * What prom-client's own Histogram gives its registry, by prom-client's
 * typings: `get()` below is checked against them, so an upgrade that renames
 * or retypes a field the registry reads fails to compile.
 */
type HistogramSnapshot = Awaited<ReturnType<Histogram["get"]>>;

/** One line of the exposition, in the form prom-client's registry reads from `get()`. */
interface ExposedValue {
  labels: Record<string, string | number>;
  value: number;
  metricName: string;
  /** None here; present, as in prom-client's values (null on buckets, undefined on the sum and count). */
  exemplar: null | undefined;
}

/**
 * A histogram without labels, exposed exactly as prom-client's `Histogram`
 * exposes one, whose `observe` is a bucket search and three additions.
 *
 * Why: prom-client's `observe` makes a closure and a label object, and
 * validates and hashes the (empty) labels, on every call; the gateway
 * observes the publish latency of every event it stores, and that was a
 * few percent of its CPU per event.
 *
 * prom-client has no supported interface for a metric of one's own (its
 * registry takes its four classes), so this one is registered by a cast and
 * stands on what the registry reads of a metric: `name`, `help`, `type`,
 * `aggregator`, `get()` and `reset()`. Two guards hold that up across
 * upgrades: `get()`'s fields are typed by prom-client's own Histogram (above),
 * and test/metrics/tally-histogram.test.ts compares, through every path of
 * the registry (text, JSON, OpenMetrics, default labels, a single metric,
 * merged registries, reset), what it exposes with prom-client's Histogram fed
 * the same values.
 */
export class TallyHistogram {
  readonly type = "histogram";
  readonly aggregator = "sum";
  readonly #bounds: readonly number[];
  /** Observations per bucket (not cumulative); the last one is above every bound. */
  readonly #counts: Float64Array;
  #sum = 0;
  #count = 0;

  constructor(
    readonly name: string,
    readonly help: string,
    buckets: readonly number[],
    /** Either content type, as prom-client's own metrics take. */
    registry: Registry<RegistryContentType>,
  ) {
    const bounds = [...buckets].sort((a, b) => a - b);
    if (bounds.some((b, i) => !Number.isFinite(b) || (i > 0 && b === bounds[i - 1]))) {
      throw new RangeError(
        `histogram ${name}: buckets must be distinct finite numbers, got ${buckets.join(", ")}`,
      );
    }
    this.#bounds = bounds;
    this.#counts = new Float64Array(bounds.length + 1);
    registry.registerMetric(this as unknown as Metric);
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) throw new TypeError(`histogram ${this.name}: not a finite number: ${value}`);
    const bounds = this.#bounds;
    let i = 0;
    while (i < bounds.length && value > (bounds[i] as number)) i++;
    (this.#counts[i] as number)++;
    this.#sum += value;
    this.#count++;
  }

  get(): Promise<{
    name: string;
    help: string;
    type: "histogram";
    values: ExposedValue[];
    aggregator: "sum";
  }> {
    const bucket = `${this.name}_bucket`;
    // Built against prom-client's typing of its own histogram's values (see HistogramSnapshot).
    const values: ExposedValue[] = [];
    let below = 0;
    for (let i = 0; i < this.#bounds.length; i++) {
      below += this.#counts[i] as number;
      values.push({
        labels: { le: this.#bounds[i] as number },
        value: below,
        metricName: bucket,
        exemplar: null,
      });
    }
    values.push(
      { labels: { le: "+Inf" }, value: this.#count, metricName: bucket, exemplar: null },
      { labels: {}, value: this.#sum, metricName: `${this.name}_sum`, exemplar: undefined },
      { labels: {}, value: this.#count, metricName: `${this.name}_count`, exemplar: undefined },
    );
    return Promise.resolve({
      name: this.name satisfies HistogramSnapshot["name"],
      help: this.help satisfies HistogramSnapshot["help"],
      type: this.type,
      values: values satisfies HistogramSnapshot["values"],
      aggregator: this.aggregator satisfies HistogramSnapshot["aggregator"],
    });
  }

  reset(): void {
    this.#counts.fill(0);
    this.#sum = 0;
    this.#count = 0;
  }
}
