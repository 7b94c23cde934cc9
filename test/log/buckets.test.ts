/** The guards every bucket and the log are made with, and how a weaker existing one is described (pure parts). */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { BUCKET_MAX_CONSUMERS, bucketStreamConfig, weakerSettings } from "../../src/log/index.js";

describe("bucket streams", () => {
  it("are made for puts only, with a consumer limit, and otherwise as the KV library makes them", () => {
    const c = bucketStreamConfig("llmgw-gateways", { history: 1, ttlMs: 10_000, replicas: 3 });
    assert.equal(c.name, "KV_llmgw-gateways");
    assert.deepEqual(c.subjects, ["$KV.llmgw-gateways.>"]);
    assert.equal(c.allow_rollup_hdrs, false);
    assert.equal(c.deny_purge, true);
    assert.equal(c.deny_delete, true);
    assert.equal(c.max_consumers, BUCKET_MAX_CONSUMERS);
    assert.equal(c.max_msgs_per_subject, 1);
    assert.equal(c.max_age, 10_000 * 1_000_000);
    assert.equal(c.num_replicas, 3);
    assert.equal(c.allow_direct, true);
    assert.equal(bucketStreamConfig("b", { history: 5 }).max_age, 0, "no TTL: entries stay");
  });

  it("a weaker existing stream is described guard by guard; a stricter consumer limit is not weaker", () => {
    const wanted = { max_consumers: 256 };
    const made = bucketStreamConfig("b", { history: 1 });
    assert.deepEqual(weakerSettings(made, wanted), []);
    assert.deepEqual(weakerSettings({ ...made, max_consumers: 8 }, wanted), []);
    const old = weakerSettings({ allow_rollup_hdrs: true, deny_purge: false, max_consumers: -1 }, wanted);
    assert.equal(old.length, 4);
    assert.match(
      old.join("; "),
      /Nats-Rollup.*purged.*deleted.*any number of consumers \(at most 256 wanted\)/,
    );
    assert.deepEqual(weakerSettings({ ...made, max_consumers: 1000 }, wanted), [
      "it allows 1000 consumers (at most 256 wanted)",
    ]);
  });
});
