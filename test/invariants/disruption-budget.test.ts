/**
 * check-log's `below-disruption-budget`: a pass that drains ready replicas
 * leaves the model at its minAvailable or, with none, make-before-break (as
 * many ready as before, or as desired). Given events → the violations; the
 * clean histories are the real decide's.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { checkLog } from "../../src/invariants/index.js";
import { Fleet, llama8b } from "../support/fleet.js";

const MODEL = "llama-3.1-8b";

/** Two nodes serving `replicas` of the 8B model, converged through the real decide. */
function serving(replicas: number, minAvailable?: string): Fleet {
  const f = new Fleet();
  f.catalog({ ...llama8b(replicas), ...(minAvailable === undefined ? {} : { minAvailable }) });
  f.connect("gpu-1");
  f.connect("gpu-2");
  f.advance(1000).run();
  assert.equal(f.replicasOf(MODEL).filter((r) => r.phase === "running").length, replicas);
  return f;
}

/** A pass draining `replicaIds` outright, decided on the log up to `observedSeq` (default: all of it). */
function drainPass(f: Fleet, replicaIds: string[], observedSeq = f.state.seq): void {
  f.handPass(
    replicaIds.map((replicaId) => ({
      explanation: "drain",
      kind: { case: "replicaDrainStarted", value: { replicaId, reason: "node drain" } },
    })),
    { observedSeq },
  );
}

const budgetViolations = (f: Fleet) =>
  checkLog(f.events).violations.filter((v) => v.rule === "below-disruption-budget");

describe("below-disruption-budget", () => {
  it("a node drained by the real decide (make-before-break) keeps the model ready: clean", () => {
    const f = serving(2);
    const node = f.replicasOf(MODEL)[0]!.shards[0]!.nodeId;
    f.drain(node);
    f.run();
    assert.ok(
      f.events.some(
        (r) =>
          r.event.body.case === "reconcilePass" &&
          r.event.body.value.decisions.some((d) => d.kind.case === "replicaDrainStarted"),
      ),
      "the history holds a drain",
    );
    assert.deepEqual(budgetViolations(f), []);
  });

  it("a scale-down by the real decide drains to the desired count: clean", () => {
    const f = serving(2);
    f.catalog(llama8b(1));
    f.run();
    assert.equal(f.replicasOf(MODEL).filter((r) => r.phase === "running").length, 1);
    assert.deepEqual(budgetViolations(f), []);
  });

  it("without minAvailable, a drain before any replacement is ready breaks make-before-break", () => {
    const f = serving(2);
    const [a] = f.replicasOf(MODEL);
    drainPass(f, [a!.replicaId]);
    const vs = budgetViolations(f);
    assert.equal(vs.length, 1);
    assert.equal(vs[0]!.seq, f.state.seq);
    assert.match(
      vs[0]!.message,
      /drained ready replicas of llama-3\.1-8b: 2 → 1 ready, below 2 \(no minAvailable: make-before-break\)/,
    );
  });

  it("with minAvailable 1 of 2, one replica may go first; both may not", () => {
    const one = serving(2, "1");
    drainPass(one, [one.replicasOf(MODEL)[0]!.replicaId]);
    assert.deepEqual(budgetViolations(one), []);

    const both = serving(2, "1");
    drainPass(
      both,
      both.replicasOf(MODEL).map((r) => r.replicaId),
    );
    const vs = budgetViolations(both);
    assert.equal(vs.length, 1);
    assert.match(vs[0]!.message, /2 → 0 ready, below minAvailable 1 = 1/);
  });

  it("a ready replica the pass records as failed was lost, not taken: clean", () => {
    const f = serving(2);
    const [a] = f.replicasOf(MODEL);
    f.handPass([
      {
        explanation: "agent back running nothing",
        kind: {
          case: "replicaFailed",
          value: { replicaId: a!.replicaId, error: "gone after the agent restarted" },
        },
      },
    ]);
    assert.deepEqual(budgetViolations(f), []);
  });

  it("a shard report of the model between the observed sequence and the pass is a race, not the pass's doing", () => {
    const f = serving(2);
    const [a, b] = f.replicasOf(MODEL);
    const observed = f.state.seq;
    const s = b!.shards[0]!;
    // b reports (running still) after the pass decided: the pass's view of the model is older than the log's.
    f.shard(s.nodeId, b!.replicaId, s.shardId, ShardStatus_State.RUNNING);
    drainPass(f, [a!.replicaId], observed);
    assert.deepEqual(budgetViolations(f), []);
    // The same drain decided on the log with that report: the pass's doing.
    drainPass(f, [b!.replicaId]);
    assert.equal(budgetViolations(f).length, 1);
  });

  it("a rollout whose policy takes a replica down first (maxUnavailable 1, maxSurge 0, no minAvailable), by the real decide: clean", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.catalog(llama8b(8));
    f.run();
    f.catalog({
      ...llama8b(8),
      profiles: llama8b(8).profiles.map((p) => ({ ...p, engineArgs: ["--x"] })),
      rollout: { maxSurge: 0, maxUnavailable: 1 },
    });
    f.run(60);
    assert.ok(
      f.events.some(
        (r) =>
          r.event.body.case === "reconcilePass" &&
          r.event.body.value.decisions.some((d) => d.kind.case === "replicaDrainStarted"),
      ),
      "the rollout drained old replicas",
    );
    assert.deepEqual(checkLog(f.events).violations, []);
  });

  it("a scale-down below a stated minAvailable, by the real decide: the floor is the desired count, clean", () => {
    const f = serving(4, "3");
    f.catalog({ ...llama8b(2), minAvailable: "3" });
    f.run();
    assert.equal(f.replicasOf(MODEL).filter((r) => r.phase === "running").length, 2);
    assert.deepEqual(budgetViolations(f), []);
  });
});
