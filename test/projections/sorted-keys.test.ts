import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type FleetState, recordValues, sortedKeys } from "../../src/projections/index.js";
import { Fleet, llama8b, llama70b, llama405b } from "../support/fleet.js";

/** What the kept key lists must answer: the containers' own enumeration. */
function assertExact(state: FleetState, when: string): void {
  for (const [name, rec] of [
    ["nodes", state.inventory.nodes],
    ["replicas", state.replicas.replicas],
  ] as const) {
    assert.deepEqual(sortedKeys(rec), Object.keys(rec).sort(), `sorted keys of ${name} ${when}`);
    assert.deepEqual(
      recordValues(rec as Record<string, unknown>),
      Object.values(rec),
      `values of ${name} ${when}`,
    );
  }
}

describe("projections: the key lists kept for nodes and replicas", () => {
  it("given a fleet's life through the real fold (placements, scale-down, removals, a lost node), the sorted keys and values match the containers after every step", () => {
    const f = new Fleet();
    for (const n of ["gpu-a1", "gpu-a2", "gpu-a3", "gpu-b1"]) {
      f.connect(n);
      assertExact(f.state, `after ${n} connected`);
    }
    f.catalog(llama70b(3), llama8b(4), llama405b(1));
    for (let i = 0; i < 20; i++) {
      const out = f.step();
      assertExact(f.state, `after pass ${i}`);
      if (out.decisions.length === 0 && out.commands.length === 0) break;
      f.obey(out);
      assertExact(f.state, `after the agents answered pass ${i}`);
    }
    const before = Object.keys(f.state.replicas.replicas).length;
    f.catalog(llama70b(1), llama8b(2), llama405b(1));
    f.disconnect("gpu-a3").advance(f.config.lostAfterMs);
    f.connect("gpu-c1");
    for (let i = 0; i < 20; i++) {
      const out = f.step();
      assertExact(f.state, `after scale-down pass ${i}`);
      if (out.decisions.length === 0 && out.commands.length === 0) break;
      f.obey(out);
      assertExact(f.state, `after the agents answered scale-down pass ${i}`);
    }
    assert.ok(Object.keys(f.state.replicas.replicas).length < before, "replicas were removed");
  });

  it("a node id that is an array index ('42', listed first by the language whatever the insertion order) is answered as the container lists it", () => {
    const f = new Fleet();
    for (const n of ["gpu-a1", "42", "gpu-b1", "7"]) f.connect(n);
    assertExact(f.state, "with numeric node ids");
    assert.deepEqual(
      recordValues(f.state.inventory.nodes).map((n) => n.nodeId),
      ["7", "42", "gpu-a1", "gpu-b1"],
    );
  });
});
