/**
 * `check-log --redecide`'s pure parts: the exact comparison of a recorded
 * pass with the one decide makes again (every decision and command, field
 * by field, and the truncation flag), and the re-run over a whole log
 * folded with the real fold: clean on a log whose passes the real decide
 * made (gateway loss included, whose live set the log holds only through
 * the pass), and naming the pass and the decision when one was altered.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { clone, create, type MessageInitShape } from "@bufbuild/protobuf";
import { DecisionSchema, EventSchema, ReconcilePassSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import {
  comparePass,
  DEFAULT_RECONCILER_CONFIG,
  formatRedecided,
  redecideLog,
} from "../../src/reconciler/index.js";
import { busyFleet, Fleet, llama8b } from "../support/fleet.js";

const placed = (replicaId: string, gpu: number) =>
  create(DecisionSchema, {
    explanation: `placed ${replicaId}`,
    kind: {
      case: "replicaPlaced",
      value: {
        replicaId,
        model: "m",
        profile: "tp1",
        shards: [{ shardId: `${replicaId}-s0`, nodeId: "gpu-a1", gpuIndices: [gpu] }],
      },
    },
  });

const pass = (init: MessageInitShape<typeof ReconcilePassSchema> = {}) =>
  create(ReconcilePassSchema, {
    leaderId: "rec-1",
    observedSeq: 7n,
    nowUnixMs: 1_780_000_000_000n,
    decisions: [placed("m-7-1", 0), placed("m-7-2", 1)],
    commands: [{ commandId: "c-7-1", nodeId: "gpu-a1", sessionId: "s-1", attempt: 1 }],
    ...init,
  });

/**
 * A busy fleet's log (passes by the real decide), copied so that it can be
 * altered, and its first pass that places a replica: where, and the index of
 * that placement among the pass's decisions.
 */
function placingLog() {
  const f = busyFleet();
  f.run();
  const events = f.events.map((r) => ({ ...r, event: clone(EventSchema, r.event) }));
  for (const r of events) {
    if (r.event.body.case !== "reconcilePass") continue;
    const decisions = r.event.body.value.decisions;
    const index = decisions.findIndex((d) => d.kind.case === "replicaPlaced");
    const placed = decisions[index]?.kind;
    if (placed?.case === "replicaPlaced")
      return { config: f.config, events, r, index, decision: decisions[index]!, placed: placed.value };
  }
  throw new Error("no pass places a replica");
}

describe("redecide: comparing a recorded pass with decide's again", () => {
  it("finds nothing between equal passes", () => {
    assert.deepEqual(comparePass(pass(), pass()), []);
  });

  it("names the decision by position and kind, and the first field that differs", () => {
    const other = pass({ decisions: [placed("m-7-1", 0), placed("m-7-2", 3)] });
    assert.deepEqual(comparePass(pass(), other), [
      {
        what: "decision",
        index: 1,
        kind: "replicaPlaced",
        field: "replicaPlaced.shards[0].gpuIndices[0]",
        recorded: "1",
        redecided: "3",
      },
    ]);
    const reworded = pass();
    reworded.decisions[0]!.explanation = "placed m-7-1 (pass 2)";
    assert.deepEqual(
      comparePass(pass(), reworded).map((d) => [d.index, d.field, d.recorded, d.redecided]),
      [[0, "explanation", '"placed m-7-1"', '"placed m-7-1 (pass 2)"']],
    );
  });

  it("reports a decision or command one side lacks, and the truncation flag", () => {
    const fewer = pass({ decisions: [placed("m-7-1", 0)], commands: [], truncated: true });
    const d = comparePass(pass(), fewer);
    assert.deepEqual(
      d.map((x) => [x.what, x.index, x.kind, x.redecided]),
      [
        ["decision", 1, "replicaPlaced", "(none)"],
        ["command", 0, "unknown", "(none)"],
        ["truncated", 0, "truncated", "true"],
      ],
    );
    const more = comparePass(fewer, pass());
    assert.equal(more[0]?.recorded, "(none)");
    assert.match(more[0]?.redecided ?? "", /m-7-2/);
  });
});

describe("redecide: a log whose passes the real decide made", () => {
  it("is decided again the same, pass by pass, on the state each observed", () => {
    const f = busyFleet();
    f.run();
    const report = redecideLog(f.events, { config: f.config });
    assert.ok(report.passes >= 3, `passes: ${report.passes}`);
    assert.deepEqual(report.differing, []);
  });

  it("takes a lost gateway from the pass that expired it (its lease is not in the log)", () => {
    const f = Fleet.of([llama8b(2)], ["gpu-a1"]);
    f.run();
    f.live.delete("gw-1");
    const out = f.step();
    assert.ok(
      out.decisions.some((d) => d.kind.case === "sessionsExpired" && d.kind.value.gatewayId === "gw-1"),
    );
    assert.deepEqual(redecideLog(f.events, { config: f.config }).differing, []);
  });

  it("reports a pass whose recorded decision decide does not make, naming the pass and the decision", () => {
    const { config, events, r, index, decision: d } = placingLog();
    // Only the wording: the fold, and so every later pass, stays the same.
    const said = d.explanation;
    d.explanation = `${said} (pass 99)`;
    const report = redecideLog(events, { config });
    assert.equal(report.differing.length, 1, JSON.stringify(report.differing.map((p) => p.seq)));
    const p = report.differing[0]!;
    assert.equal(p.seq, r.seq);
    assert.equal(p.eventId, r.event.id);
    assert.deepEqual(
      p.differences.map((x) => [x.what, x.index, x.kind, x.field, x.recorded]),
      [["decision", index, "replicaPlaced", "explanation", JSON.stringify(`${said} (pass 99)`)]],
    );
    assert.match(
      formatRedecided(p),
      new RegExp(
        `^pass ${r.event.id} by rec-1 on the state at seq ${p.observedSeq}: decision ${index + 1} \\(replicaPlaced\\) differs at explanation: recorded ".*\\(pass 99\\)", re-decided "[^"]*"$`,
      ),
    );
  });

  it("reports the altered pass first when the alteration changes what later passes see", () => {
    const { config, events, r, placed } = placingLog();
    placed.shards[0]!.gpuIndices = [7];
    const first = redecideLog(events, { config }).differing[0];
    assert.equal(first?.seq, r.seq);
    assert.ok(
      first?.differences.some(
        (x) => x.field === "replicaPlaced.shards[0].gpuIndices[0]" && x.recorded === "7",
      ),
    );
  });

  it("reports every pass when decide is given another config than the reconciler's", () => {
    const f = busyFleet();
    f.run();
    const report = redecideLog(f.events, { config: { ...DEFAULT_RECONCILER_CONFIG, policy: "spread" } });
    assert.ok(report.differing.length > 0);
  });
});
