/** The pure parts of the router: the replica picker and the scan for a body's model. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  affinityKey,
  type Candidate,
  pickReplica,
  replicaOfRankZeroShard,
  scanModel,
} from "../../src/router/index.js";

const c = (replicaId: string, o: Partial<Candidate> = {}): Candidate => ({
  replicaId,
  url: `http://127.0.0.1/${replicaId}`,
  inFlight: 0,
  queueDepth: 0,
  kvCacheUse: 0,
  ejected: false,
  ...o,
});

/** A fixed sequence of random numbers, cycled. */
const seq = (...xs: number[]) => {
  let i = 0;
  return () => xs[i++ % xs.length] as number;
};

describe("pickReplica", () => {
  it("of two drawn, takes the one with fewer requests in flight", () => {
    const cands = [c("a", { inFlight: 5 }), c("b", { inFlight: 1 }), c("c", { inFlight: 3 })];
    // Draws a (index 0) and then c (index 1 of the others, i.e. 2).
    assert.equal(pickReplica({ candidates: cands, random: seq(0, 0.75) })?.replicaId, "c");
    // Draws a and b.
    assert.equal(pickReplica({ candidates: cands, random: seq(0, 0) })?.replicaId, "b");
  });

  it("weighs reported queue depth and KV-cache use with requests in flight", () => {
    const busyQueue = [c("a", { inFlight: 1, queueDepth: 6 }), c("b", { inFlight: 3 })];
    assert.equal(pickReplica({ candidates: busyQueue, random: seq(0, 0) })?.replicaId, "b");
    const fullCache = [c("a", { inFlight: 1, kvCacheUse: 1 }), c("b", { inFlight: 2, kvCacheUse: 0 })];
    assert.equal(pickReplica({ candidates: fullCache, random: seq(0, 0) })?.replicaId, "b");
  });

  it("spreads ties over every candidate", () => {
    const cands = ["a", "b", "c", "d"].map((id) => c(id));
    const seen = new Map<string, number>();
    let x = 0.123;
    const random = () => {
      x = (x * 9301 + 0.49297) % 1;
      return x;
    };
    for (let i = 0; i < 400; i++) {
      const p = pickReplica({ candidates: cands, random })!.replicaId;
      seen.set(p, (seen.get(p) ?? 0) + 1);
    }
    assert.deepEqual([...seen.keys()].sort(), ["a", "b", "c", "d"]);
    for (const n of seen.values()) assert.ok(n > 40, `uneven spread ${JSON.stringify([...seen])}`);
  });

  it("never picks an excluded replica; an ejected one only when nothing else is left", () => {
    const cands = [c("a", { ejected: true }), c("b"), c("c")];
    for (const r of [0, 0.2, 0.5, 0.9]) {
      const p = pickReplica({ candidates: cands, exclude: new Set(["b"]), random: seq(r, r) });
      assert.equal(p?.replicaId, "c");
    }
    assert.equal(
      pickReplica({ candidates: cands, exclude: new Set(["b", "c"]), random: seq(0.5) })?.replicaId,
      "a",
    );
    assert.equal(
      pickReplica({ candidates: cands, exclude: new Set(["a", "b", "c"]), random: seq(0.5) }),
      undefined,
    );
    assert.equal(pickReplica({ candidates: [], random: seq(0.5) }), undefined);
  });

  it("with an affinity key, the same replica for the same prefix while it is not overloaded", () => {
    const cands = ["a", "b", "c", "d"].map((id) => c(id));
    const first = pickReplica({ candidates: cands, affinity: "You are a helpful", random: seq(0.1, 0.6) })!;
    for (const r of [0, 0.3, 0.7, 0.99]) {
      const again = pickReplica({ candidates: cands, affinity: "You are a helpful", random: seq(r, 1 - r) });
      assert.equal(again?.replicaId, first.replicaId);
    }
    // Overloaded: the two-choices pick wins.
    const loaded = cands.map((x) => (x.replicaId === first.replicaId ? { ...x, inFlight: 50 } : x));
    const other = pickReplica({ candidates: loaded, affinity: "You are a helpful", random: seq(0.1, 0.6) });
    assert.notEqual(other?.replicaId, first.replicaId);
    // A replica leaving moves only its own keys.
    const keys = Array.from({ length: 200 }, (_, i) => `prompt ${i}`);
    const before = keys.map(
      (k) => pickReplica({ candidates: cands, affinity: k, random: seq(0) })!.replicaId,
    );
    const after = keys.map(
      (k) =>
        pickReplica({ candidates: cands.filter((x) => x.replicaId !== "d"), affinity: k, random: seq(0) })!
          .replicaId,
    );
    keys.forEach((_, i) => {
      if (before[i] !== "d") assert.equal(after[i], before[i]);
    });
  });

  it("affinityKey: the prompt's first characters, of a completion or a chat", () => {
    assert.equal(affinityKey({ prompt: "abcdef" }, 3), "abc");
    assert.equal(
      affinityKey(
        {
          messages: [
            { role: "system", content: "ab" },
            { role: "user", content: [{ type: "text", text: "cd" }] },
          ],
        },
        3,
      ),
      "abc",
    );
    assert.equal(affinityKey({ model: "m" }, 3), undefined);
    assert.equal(affinityKey(null, 3), undefined);
  });

  it("replicaOfRankZeroShard reads the reconciler's shard ids", () => {
    assert.equal(replicaOfRankZeroShard("llama-3.1-8b-12-1-s0-12"), "llama-3.1-8b-12-1");
    assert.equal(replicaOfRankZeroShard("llama-12-1-s1-12"), undefined);
    assert.equal(replicaOfRankZeroShard("adopted-shard"), undefined);
  });
});

describe("scanModel", () => {
  it("finds the top-level model as soon as it has arrived", () => {
    assert.deepEqual(scanModel('{"model": "chat", "messages": [', false), { kind: "model", model: "chat" });
    assert.deepEqual(scanModel('{"model": "ch', false), { kind: "more" });
    assert.deepEqual(
      scanModel(
        '{"messages":[{"role":"user","content":"say \\"model\\": \\"x\\" {"}],"n":1,"model":"m\\u0031"}',
        true,
      ),
      { kind: "model", model: "m1" },
    );
    assert.deepEqual(scanModel('{"a":{"model":"inner"},"model":"outer"}', true), {
      kind: "model",
      model: "outer",
    });
  });

  it("says what is wrong with a body that cannot be routed", () => {
    const invalid = (text: string, complete = true) => {
      const r = scanModel(text, complete);
      assert.equal(r.kind, "invalid", `${text}: ${JSON.stringify(r)}`);
      return r.kind === "invalid" ? r.message : "";
    };
    assert.match(invalid('{"messages":[]}'), /no "model"/);
    assert.match(invalid("{}"), /no "model"/);
    assert.match(invalid("[1,2]"), /JSON object/);
    assert.match(invalid("not json", false), /JSON object/);
    assert.match(invalid('{"model": 7}'), /must be a string/);
    assert.match(invalid('{"model": ""}'), /empty/);
    assert.match(invalid(""), /empty/);
    assert.match(invalid('{"model'), /ends too early/);
    assert.match(invalid('{"a":[1}'), /brackets/);
    assert.match(invalid('{"a" 1}'), /':'/);
  });
});
