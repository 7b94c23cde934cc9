/**
 * The leader's view of live gateways against a real KV bucket. A gateway
 * wrongly missing from it makes the leader expire every session the gateway
 * holds, so a key being renewed while the bucket is listed must not blink out.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { jetstream } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { pino } from "pino";
import { LiveGateways } from "../../src/reconciler/runner/live-gateways.js";
import { type NatsServer, startServer } from "../harness/nats.js";
import { eventually } from "../support/eventually.js";
import { rand } from "../support/gateway.js";

describe("live gateways", () => {
  let server: NatsServer & { close(): Promise<void> };
  let nc: NatsConnection;
  before(async () => {
    server = await startServer();
    nc = await connect({ servers: server.url });
  });
  after(async () => {
    await nc?.close();
    await server?.close();
  });

  it("keeps a gateway whose lease is renewed while the bucket is listed, and drops one whose lease expired", async () => {
    const bucket = `gws_${rand()}`;
    // As the gateway makes it: one revision per key, entries expire after the TTL.
    const kv = await new Kvm(nc).create(bucket, { ttl: 1000, history: 1 });
    await kv.put("gw-busy", "lease");
    await kv.put("gw-dead", "lease");
    const live = new LiveGateways(jetstream(nc), { bucket, pollMs: 1 }, pino({ level: "silent" }));
    const seen: string[][] = [];
    live.onChange(() => seen.push([...live.ids].sort()));
    let renewing = true;
    let renewed = 0;
    // Renewals far more often than a real gateway's, so listings overlap them again and again.
    const renewals = (async () => {
      while (renewing) {
        await kv.put("gw-busy", "lease");
        renewed++;
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    try {
      await live.start();
      assert.deepEqual([...live.ids].sort(), ["gw-busy", "gw-dead"]);
      // gw-dead is never renewed: its entry expires and it leaves the set.
      await eventually(() => !live.ids.has("gw-dead"), { what: "gw-dead dropped after its TTL" });
      // Keep listing for a while under renewals; after every listing gw-busy is in the set.
      const renewedBefore = renewed;
      for (let i = 0; i < 300; i++) {
        await live.refresh();
        assert.ok(live.ids.has("gw-busy"), `gw-busy missing from the set after listing ${i + 1}`);
      }
      // The scenario happened: the listings ran while the key was being renewed.
      assert.ok(
        renewed - renewedBefore >= 30,
        `only ${renewed - renewedBefore} renewals during 300 listings`,
      );
      const blinks = seen.filter((ids) => !ids.includes("gw-busy"));
      assert.deepEqual(blinks, [], "gw-busy never left the set");
      assert.deepEqual([...live.ids], ["gw-busy"]);
    } finally {
      renewing = false;
      await renewals;
      live.stop();
    }
  });

  it("confirm: a lease the set has not seen yet (the log can be ahead of the watch) joins it; a missing one does not", async () => {
    const bucket = `gws_${rand()}`;
    const kv = await new Kvm(nc).create(bucket, { ttl: 10_000, history: 1 });
    const live = new LiveGateways(jetstream(nc), { bucket, pollMs: 60_000 }, pino({ level: "silent" }));
    try {
      // One listing, no watch and no polling: the set stays as it was listed.
      await live.refresh();
      assert.deepEqual([...live.ids], []);
      await kv.put("gw-new", "lease");
      assert.deepEqual([...live.ids], [], "not seen without a listing or a watch");
      await live.confirm(["gw-new", "gw-gone"]);
      assert.deepEqual([...live.ids], ["gw-new"]);
    } finally {
      live.stop();
    }
  });
});
