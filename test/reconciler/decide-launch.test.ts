/** What a StartShard says about launching: the engine, and where a multi-node replica's ranks meet. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { InventoryState, ProfileSpec } from "../../src/projections/index.js";
import { launchFields, rendezvousPort } from "../../src/reconciler/decide/launch.js";

const profile = (engine: string) => ({ engine }) as ProfileSpec;
const inventory = (addrs: Record<string, string>) =>
  ({
    nodes: Object.fromEntries(Object.entries(addrs).map(([id, a]) => [id, { advertiseAddress: a }])),
    gateways: {},
  }) as unknown as InventoryState;

describe("decide: launch fields of a start", () => {
  it("names the profile's engine, default when it names none, and no rendezvous for one shard", () => {
    assert.deepEqual(launchFields(inventory({}), profile("vllm"), "r1", ["n1"]), {
      engine: "vllm",
      masterAddr: "",
      masterPort: 0,
    });
    assert.equal(launchFields(inventory({}), profile(""), "r1", []).engine, "default");
  });

  it("gives every rank rank 0's advertised address (its node id when it advertised none) and one port per replica", () => {
    const inv = inventory({ "gpu-1": "10.0.0.5", "gpu-2": "" });
    const a = launchFields(inv, profile("default"), "r-405b-1", ["gpu-1", "gpu-2"]);
    assert.equal(a.masterAddr, "10.0.0.5");
    assert.equal(a.masterPort, rendezvousPort("r-405b-1"));
    assert.ok(a.masterPort >= 29500 && a.masterPort < 30500);
    assert.equal(launchFields(inv, profile("default"), "r-405b-1", ["gpu-2", "gpu-1"]).masterAddr, "gpu-2");
    assert.equal(rendezvousPort("r-405b-1"), rendezvousPort("r-405b-1"), "the same for every re-send");
    assert.notEqual(rendezvousPort("r-405b-1"), rendezvousPort("r-405b-2"));
  });
});
