/**
 * The one push-fed queue: order, the bound, replacing a waiting value,
 * ending after what is queued, failing at once, and a return() while a
 * next() waits (what a transport does when a call ends).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { PushQueue } from "../../src/async/push-queue.js";
import { StreamWriter } from "../../src/gateway/writer.js";

async function drain<T>(q: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const v of q) out.push(v);
  return out;
}

describe("PushQueue", () => {
  it("hands values over in order, to a waiting reader too, and ends after what is queued", async () => {
    const q = new PushQueue<number>();
    const it = q[Symbol.asyncIterator]();
    const first = it.next();
    assert.equal(q.push(1), "queued");
    assert.deepEqual(await first, { value: 1, done: false });
    q.push(2);
    q.push(3);
    q.end();
    assert.equal(q.push(4), "closed");
    assert.deepEqual(await drain({ [Symbol.asyncIterator]: () => it }), [2, 3]);
  });

  it("refuses a push beyond its bound, and replaces only a value still waiting", async () => {
    const q = new PushQueue<string>(2);
    assert.equal(q.push("a"), "queued");
    assert.equal(q.push("b"), "queued");
    assert.equal(q.push("c"), "full");
    assert.equal(
      q.replaceLast("b2", (last) => last === "b"),
      true,
    );
    assert.equal(
      q.replaceLast("x", (last) => last === "nope"),
      false,
    );
    q.end();
    assert.deepEqual(await drain(q), ["a", "b2"]);
    assert.equal(
      q.replaceLast("late", () => true),
      false,
      "nothing waits once taken",
    );
  });

  it("fails a waiting reader at once and drops what is queued", async () => {
    const q = new PushQueue<number>();
    const it = q[Symbol.asyncIterator]();
    const waiting = it.next();
    q.fail(new Error("gone"));
    await assert.rejects(waiting, /gone/);
    assert.equal(q.push(1), "closed");
    const q2 = new PushQueue<number>();
    q2.push(1);
    q2.fail(new Error("reset"));
    await assert.rejects(drain(q2), /reset/);
  });

  it("answers return() while a next() waits, and takes no more pushes", async () => {
    const q = new PushQueue<number>();
    const it = q[Symbol.asyncIterator]();
    const waiting = it.next();
    assert.deepEqual(await it.return?.(), { value: undefined, done: true });
    assert.deepEqual(await waiting, { value: undefined, done: true });
    assert.equal(q.push(1), "closed");
  });

  it("refuses a bound that is not a positive integer", () => {
    assert.throws(() => new PushQueue(0), /positive integer, got 0/);
    assert.throws(() => new StreamWriter(1.5), /positive integer, got 1.5/);
  });
});

describe("StreamWriter (the gateway's bounded PushQueue)", () => {
  it("replaces the last waiting message it supersedes, and queues otherwise", async () => {
    const w = new StreamWriter<string>(4);
    assert.equal(w.push("ack-1"), "queued");
    assert.equal(
      w.pushReplacingLast("ack-2", (last) => last.startsWith("ack")),
      "replaced",
    );
    assert.equal(
      w.pushReplacingLast("cmd", (last) => last === "never"),
      "queued",
    );
    w.end();
    assert.equal(
      w.pushReplacingLast("late", () => true),
      "closed",
    );
    assert.deepEqual(await drain(w), ["ack-2", "cmd"]);
  });
});
