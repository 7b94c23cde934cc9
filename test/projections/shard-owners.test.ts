/**
 * The replicas fold finds the replica a stop or drain command's shard
 * belongs to through an index beside the state. These tests hold it to the
 * answer of a plain scan, through moves, removals, failures, adoption of a
 * shard another replica already names, and a state copied mid-history (as
 * a snapshot load gives).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Event } from "../../src/gen/llmgw/v1/events_pb.js";
import {
  canonicalJson,
  evolveFleet,
  type FleetState,
  initialFleet,
  reviveFleet,
} from "../../src/projections/index.js";
import { fleetChurn } from "../support/fleet-churn.js";
import { command, decide, EventFactory, llamaCatalog, s70 } from "../support/fleet-events.js";
import { timeOf } from "./gwt.js";

const M70 = "llama-3.3-70b";

/** The answer the index must give: the first replica, in the record's order, naming the shard on the node. */
function scanOwner(s: FleetState, nodeId: string, shardId: string): string {
  for (const r of s.replicas.replicas.values())
    if (r.shards.some((x) => x.nodeId === nodeId && x.shardId === shardId)) return r.replicaId;
  return "";
}

/**
 * Folds `events`, checking every stop/drain command's replica id against
 * scans: the owner after the pass's decisions (commands move no shard), or
 * else the owner before the pass (a pass that removes a replica and stops
 * its shards).
 */
let checked = 0;

function foldChecked(events: Iterable<Event>, start = initialFleet(), firstSeq = 1): FleetState {
  let s = start;
  let seq = firstSeq - 1;
  for (const e of events) {
    const before = new Map<string, string>();
    if (e.body.case === "reconcilePass")
      for (const c of e.body.value.commands)
        if (c.action.case === "stop" || c.action.case === "drain")
          before.set(c.commandId, scanOwner(s, c.nodeId, c.action.value.shardId));
    s = evolveFleet(s, e, { seq: ++seq, timeMs: timeOf(seq) });
    if (e.body.case !== "reconcilePass") continue;
    for (const c of e.body.value.commands) {
      if (c.action.case !== "stop" && c.action.case !== "drain") continue;
      const expected = scanOwner(s, c.nodeId, c.action.value.shardId) || (before.get(c.commandId) ?? "");
      assert.equal(
        s.replicas.commands[c.commandId]?.replicaId,
        expected,
        `command ${c.commandId} at seq ${seq}`,
      );
      checked++;
    }
  }
  return s;
}

describe("the shard-owner index of the replicas fold", () => {
  it("a long churn of places, stops and drains: every command names the replica a scan names", () => {
    checked = 0;
    foldChecked(fleetChurn({ nodes: 12, events: 6_000 }));
    assert.ok(checked > 500, `${checked} stop commands checked`);
  });

  it("a replica moved to another node: a stop for its old shard on the old node names no replica", () => {
    const f = new EventFactory();
    const s = foldChecked([
      f.catalog(llamaCatalog(1, 0)),
      f.sessionOpened("a1", "s-1", "gw-1"),
      f.sessionOpened("a2", "s-2", "gw-1"),
      f.pass(
        [
          decide.created("r1", M70),
          decide.placed("r1", M70, "tp4", [
            { shard: "r1.0", node: "a1", session: "s-1", gpus: [0, 1, 2, 3] },
          ]),
        ],
        [command.start("c-1", "a1", "s-1", s70("r1.0", "r1", [0, 1, 2, 3]))],
      ),
      // A lookup before the move, so the move must update what the lookup built.
      f.pass([], [command.stop("c-0", "a2", "s-2", "other.0")]),
      f.pass([
        decide.placed("r1", M70, "tp4", [{ shard: "r1.0", node: "a2", session: "s-2", gpus: [0, 1, 2, 3] }]),
      ]),
      f.pass([], [command.stop("c-2", "a1", "s-1", "r1.0"), command.stop("c-3", "a2", "s-2", "r1.0")]),
    ]);
    assert.equal(s.replicas.commands["c-2"]?.replicaId, "");
    assert.equal(s.replicas.commands["c-3"]?.replicaId, "r1");
  });

  it("two replicas naming one shard on a node (an adoption): the first in the record's order, as the scan", () => {
    const f = new EventFactory();
    const s = foldChecked([
      f.catalog(llamaCatalog(1, 0)),
      f.sessionOpened("a1", "s-1", "gw-1"),
      f.pass([
        decide.created("r1", M70),
        decide.placed("r1", M70, "tp4", [{ shard: "x.0", node: "a1", session: "s-1", gpus: [0, 1, 2, 3] }]),
      ]),
      f.pass([], [command.stop("c-0", "a1", "s-1", "other.0")]),
      f.pass([decide.adopted("a1", "s-1", [s70("x.0", "r2", [0, 1, 2, 3])])]),
      f.pass([], [command.stop("c-1", "a1", "s-1", "x.0")]),
      f.pass([decide.removed("r1", M70)]),
      f.pass([], [command.stop("c-2", "a1", "s-1", "x.0")]),
    ]);
    assert.equal(s.replicas.commands["c-1"]?.replicaId, "r1");
    assert.equal(s.replicas.commands["c-2"]?.replicaId, "r2");
  });

  it("a state copied mid-history (a snapshot load) folds on to the same state as the original", () => {
    const events = [...fleetChurn({ nodes: 8, events: 3_000 })];
    const head = events.slice(0, 1_500);
    const tail = events.slice(1_500);
    const original = foldChecked(head);
    const copy = reviveFleet(JSON.parse(JSON.stringify(original)));
    const a = foldChecked(tail, original, 1_501);
    const b = foldChecked(tail, copy, 1_501);
    assert.equal(canonicalJson(b), canonicalJson(a));
  });
});
