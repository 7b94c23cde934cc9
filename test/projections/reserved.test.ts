import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Event } from "../../src/gen/llmgw/v1/events_pb.js";
import { canonicalJson, foldFleet } from "../../src/projections/index.js";
import { EventFactory, h100Node, llamaCatalog, ShardStatus_State } from "../support/fleet-events.js";

const fold = (events: Event[]) =>
  foldFleet(events.map((event, i) => ({ event, seq: i + 1, timeMs: 1_000 + i })));

describe("folds: ids that name an object's prototype keys", () => {
  for (const bad of ["__proto__", "constructor", "toString", "hasOwnProperty"]) {
    it(`passes over events naming ${bad} as a node, replica, shard or command id`, () => {
      const f = new EventFactory(`reserved-${bad}`);
      const base = [
        f.gatewayStarted("gw-1"),
        f.catalog(llamaCatalog(1, 0)),
        f.sessionOpened("gpu-a1", "s-a1", "gw-1", h100Node("gpu-a1")),
      ];
      const hostile = [
        f.sessionOpened(bad, "s-x", "gw-1", h100Node(bad)),
        f.sessionOpened(
          "gpu-a2",
          "s-a2",
          "gw-1",
          h100Node("gpu-a2", {
            running: [
              { shard: "x", replica: bad, model: "llama-3.3-70b", profile: "tp4", gpus: [0, 1, 2, 3] },
            ],
          }),
        ),
        f.shardStatus("gpu-a1", "s-a1", bad, "s0", ShardStatus_State.RUNNING),
        f.shardStatus("gpu-a1", "s-a1", "r1", bad, ShardStatus_State.RUNNING),
      ];
      const clean = fold(base);
      const folded = fold([...base, ...hostile]);
      assert.equal(Object.hasOwn(Object.prototype, "session"), false);
      assert.equal(Object.hasOwn(Object, "session"), false);
      assert.equal(folded.seq, base.length + hostile.length);
      assert.equal(
        canonicalJson({ ...folded, seq: 0, timeMs: 0 }),
        canonicalJson({ ...clean, seq: 0, timeMs: 0 }),
        "the hostile events changed nothing",
      );
    });
  }
});
