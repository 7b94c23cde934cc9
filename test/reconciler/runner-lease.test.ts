import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { jetstream } from "@nats-io/jetstream";
import { Lease } from "../../src/reconciler/runner/index.js";
import { eventually } from "../support/eventually.js";
import { connectionSuite } from "../support/suites.js";

describe("reconciler lease (KV bucket with a max age)", () => {
  const env = connectionSuite();

  const open = (bucket: string, holderId: string, ttlMs = 1500) =>
    Lease.open(jetstream(env.nc), { bucket, key: "reconciler", holderId, ttlMs });

  it("is held by one process at a time; a renewal is conditioned on the revision held", async () => {
    const bucket = `lease_${Date.now().toString(36)}_a`;
    const a = await open(bucket, "a");
    const b = await open(bucket, "b");
    const got = await a.acquire();
    assert.ok(got.ok);
    assert.equal(a.valid, true);
    assert.deepEqual(await b.acquire(), { ok: false, reason: "taken" });
    const renewed = await a.renew(1000);
    assert.ok(renewed.ok && renewed.revision > got.revision);
    assert.equal((await b.holder())?.holder, "a");

    // a stops renewing: its own clock gives up before the key can expire, then b takes it.
    await eventually(() => !a.valid, { what: "a's lease validity to run out" });
    assert.equal((await a.holder())?.holder, "a", "a stops acting while the key still exists");
    await eventually(async () => (await b.acquire()).ok, { what: "b to take the expired lease" });
    assert.equal((await b.holder())?.holder, "b");
    // a's late renewal is refused: the revision it held is gone.
    assert.deepEqual(await a.renew(1000), { ok: false, reason: "lost" });
    assert.equal(a.valid, false);
    // And a's release never deletes b's lease.
    assert.equal(await a.release(), false);
    assert.equal((await b.holder())?.holder, "b");
  });

  it("is released at once by its holder so a successor need not wait", async () => {
    const bucket = `lease_${Date.now().toString(36)}_b`;
    const a = await open(bucket, "a", 60_000);
    const b = await open(bucket, "b", 60_000);
    assert.ok((await a.acquire()).ok);
    assert.equal(await a.release(), true);
    assert.ok((await b.acquire()).ok);
    assert.equal((await b.holder())?.holder, "b");
  });

  it("a stale holder's release after a successor re-created a deleted key is a no-op", async () => {
    const bucket = `lease_${Date.now().toString(36)}_d`;
    const a = await open(bucket, "a", 60_000);
    const b = await open(bucket, "b", 60_000);
    assert.ok((await a.acquire()).ok);
    // The key goes from under a (an operator's delete) and b takes the deleted key.
    await a.kv.delete("reconciler");
    const got = await b.acquire();
    assert.ok(got.ok);
    assert.equal(await a.release(), false, "a's revision is gone: its conditioned delete is refused");
    assert.deepEqual(await b.holder(), { holder: "b", revision: got.revision });
    assert.ok((await b.renew(1000)).ok, "b still holds the revision it wrote");
  });

  it("takes its TTL from an existing bucket rather than the one asked for", async () => {
    const bucket = `lease_${Date.now().toString(36)}_c`;
    const a = await open(bucket, "a", 2000);
    const b = await open(bucket, "b", 9000);
    assert.equal(a.ttlMs, 2000);
    assert.equal(b.ttlMs, 2000);
  });
});
