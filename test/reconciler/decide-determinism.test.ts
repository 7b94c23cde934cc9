import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type FleetState, reviveFleet } from "../../src/projections/index.js";
import { decide } from "../../src/reconciler/index.js";
import { busyFleet, kinds } from "../support/fleet.js";

/** The same records inserted in reverse order: record order must not matter. */
function reversed(state: FleetState): FleetState {
  // The JSON form, flipped, made a state again: the tables take the records' order.
  const s = JSON.parse(JSON.stringify(state));
  const flip = <T>(r: Record<string, T>) => Object.fromEntries(Object.entries(r).reverse());
  s.inventory.nodes = flip(s.inventory.nodes);
  s.inventory.gateways = flip(s.inventory.gateways);
  s.replicas.replicas = flip(s.replicas.replicas);
  s.replicas.commands = flip(s.replicas.commands);
  s.replicas.failures = flip(s.replicas.failures);
  s.replicas.cooldowns = flip(s.replicas.cooldowns);
  return reviveFleet(s);
}

describe("decide: determinism and the size limit", () => {
  it("gives identical output for the same input, whatever the order records were inserted in, and leaves the input alone", () => {
    const f = busyFleet();
    const before = JSON.stringify(f.state);
    const input = { state: f.state, config: f.config, nowMs: f.nowMs, liveGateways: f.live };
    const a = decide(input);
    const b = decide(input);
    const c = decide({ ...input, state: reversed(f.state) });
    assert.ok(a.decisions.length > 3);
    assert.deepEqual(b, a);
    assert.deepEqual(c, a);
    assert.equal(JSON.stringify(f.state), before, "decide does not modify its input");
  });

  it("stops at maxDecisionsPerPass in priority order (expiry before placement) and finishes in later passes", () => {
    const whole = busyFleet().decide();
    const f = busyFleet();
    f.config = { ...f.config, maxDecisionsPerPass: 2 };
    const first = f.step();
    assert.equal(first.truncated, true);
    assert.ok(first.decisions.length <= 2);
    assert.deepEqual(kinds(first.decisions), kinds(whole.decisions).slice(0, first.decisions.length));
    assert.equal(kinds(first.decisions)[0], "nodeLiveness");
    let passes = 1;
    while (f.step().truncated) passes++;
    assert.ok(passes > 2);
    assert.deepEqual(f.settle(), []);
  });

  it("converges: a pass over its own folded result decides nothing new", () => {
    const f = busyFleet();
    f.run();
    assert.deepEqual(f.decide().decisions, []);
    assert.equal(f.replicasOf("llama-3.1-8b").length, 6);
    for (const r of f.state.replicas.replicas.values())
      assert.ok(r.phase === "running" || r.pendingReason !== "");
  });
});
