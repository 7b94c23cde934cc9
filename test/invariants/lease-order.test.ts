/**
 * check-log's `stale-leader-pass`: no pass of an older lease revision lands
 * between passes of a newer one (two leaders' passes both accepted). Given
 * passes with their leaders and lease revisions → the violations.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { checkLog } from "../../src/invariants/index.js";
import { Fleet } from "../support/fleet.js";

/** Appends one pass per [leader, lease revision], each deciding on the whole log before it; their seqs. */
function passes(f: Fleet, ...by: Array<[string, number]>): number[] {
  return by.map(([leaderId, revision]) => {
    f.handPass([], { leaderId, leaseRevision: revision });
    return f.state.seq;
  });
}

const stale = (f: Fleet) => checkLog(f.events).violations.filter((v) => v.rule === "stale-leader-pass");

describe("stale-leader-pass", () => {
  it("revisions that grow across renewals and leaders: clean", () => {
    const f = new Fleet();
    passes(f, ["rec-1", 3], ["rec-1", 3], ["rec-1", 5], ["rec-2", 9], ["rec-2", 12]);
    assert.deepEqual(stale(f), []);
  });

  it("a stale leader's passes between two passes of the newer lease: each reported at its own sequence", () => {
    const f = new Fleet();
    const seqs = passes(f, ["rec-1", 3], ["rec-2", 4], ["rec-1", 3], ["rec-1", 3], ["rec-2", 5]);
    const vs = stale(f);
    assert.deepEqual(
      vs.map((v) => v.seq),
      [seqs[2], seqs[3]],
    );
    assert.match(
      vs[0]!.message,
      new RegExp(
        `pass at ${seqs[2]} by rec-1 holds lease revision 3, but the passes at ${seqs[1]} by rec-2 \\(revision 4\\) and at ${seqs[4]} by rec-2 \\(revision 5\\) surround it`,
      ),
    );
  });

  it("a log that goes on under a new lease bucket (revisions start again, then renew): clean", () => {
    const f = new Fleet();
    passes(f, ["rec-1", 40], ["rec-1", 41], ["rec-a", 1], ["rec-a", 1], ["rec-a", 2], ["rec-a", 60]);
    assert.deepEqual(stale(f), []);
  });

  it("two stale leaders of different revisions between passes of the newest lease: both reported (a renewal is its holder's)", () => {
    const f = new Fleet();
    const seqs = passes(f, ["rec-b", 9], ["rec-x", 3], ["rec-y", 5], ["rec-b", 9]);
    assert.deepEqual(
      stale(f).map((v) => v.seq),
      [seqs[1], seqs[2]],
    );
  });
});
