import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { type AttemptHandler, OrderedPipeline, type PipelinePublisher } from "../../src/gateway/ordered.js";
import type { Event } from "../../src/gen/llmgw/v1/events_pb.js";
import { EventSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import { type Appended, LogError } from "../../src/log/index.js";

/**
 * A log whose attempts settle when the test says so, and which stores an
 * event (once per id) at the next sequence when its attempt succeeds.
 */
class FakeLog {
  epoch = 0;
  connected = true;
  seq = 0;
  readonly stored = new Map<string, number>();
  readonly attempts: Array<{ id: string; settle: (ok: boolean) => void }> = [];
  /** How retries (`append`) behave. */
  retryOk = true;

  #store(id: string): Appended {
    const had = this.stored.get(id);
    if (had !== undefined) return { seq: had, duplicate: true };
    this.seq++;
    this.stored.set(id, this.seq);
    return { seq: this.seq, duplicate: false };
  }

  readonly publisher = {
    epoch: 0,
    connected: true,
    /** The shared window of this fake has `slots` free; a free slot is offered to the first waiter. */
    slots: Number.POSITIVE_INFINITY,
    waiting: [] as Array<() => boolean>,
    tryAttempt: (event: Event, handler: AttemptHandler): boolean => {
      if (this.publisher.slots <= 0) return false;
      this.publisher.slots--;
      let settled = false;
      this.attempts.push({
        id: event.id,
        // Once: an attempt's handler hears how it ended exactly once.
        settle: (ok) => {
          if (settled) return;
          settled = true;
          this.publisher.slots++;
          while (this.publisher.slots > 0) {
            const w = this.publisher.waiting.shift();
            if (w === undefined || w()) break;
          }
          if (ok) handler.stored(this.#store(event.id));
          else handler.failed(new LogError("unavailable", "timeout"));
        },
      });
      return true;
    },
    whenSlot: (taken: () => boolean): void => {
      this.publisher.waiting.push(taken);
    },
    append: async (event: Event): Promise<Appended> => {
      if (!this.retryOk) throw new LogError("unavailable", "still down");
      return this.#store(event.id);
    },
  };

  asPublisher(): PipelinePublisher {
    return this.publisher;
  }
}

const ev = (id: string) => create(EventSchema, { id });
/**
 * Failures reported by pipelines that must not fail, checked after each test:
 * a throw inside the pipeline's failure callback would be swallowed by it.
 */
let unexpectedFailures: unknown[] = [];
const unexpected = (err: unknown) => {
  unexpectedFailures.push(err);
};
const tick = () => new Promise((r) => setImmediate(r));
/** The tests push each event with what to do once it is stored. */
const run = (stored: () => void) => stored();
/** A pipeline of depth 8 that may fail, and the failure it reported (undefined while none). */
function failingPipeline(log: FakeLog) {
  let failure: unknown;
  const p = new OrderedPipeline(
    log.asPublisher(),
    8,
    new AbortController().signal,
    (e) => {
      failure = e;
    },
    run,
  );
  return { p, failure: () => failure };
}

describe("gateway: a stream's ordered publish pipeline", () => {
  beforeEach(() => {
    unexpectedFailures = [];
  });
  afterEach(() => {
    assert.deepEqual(unexpectedFailures.map(String), [], "a pipeline that must not fail reported a failure");
  });

  it("keeps several publishes in flight and hands acks over in order", async () => {
    const log = new FakeLog();
    const acked: string[] = [];
    const p = new OrderedPipeline(log.asPublisher(), 4, new AbortController().signal, unexpected, run);
    for (const id of ["a", "b", "c"]) p.push(ev(id), () => acked.push(id));
    assert.equal(log.attempts.length, 3, "three in flight at once");
    log.attempts[0]!.settle(true);
    log.attempts[1]!.settle(true);
    log.attempts[2]!.settle(true);
    await p.settled();
    assert.deepEqual(acked, ["a", "b", "c"]);
  });

  it("asks its reader to wait while `depth` events are queued", async () => {
    const log = new FakeLog();
    const p = new OrderedPipeline(log.asPublisher(), 2, new AbortController().signal, unexpected, run);
    assert.equal(p.whenRoom(), undefined, "room at first");
    p.push(ev("a"), () => {});
    assert.equal(p.whenRoom(), undefined, "room for a second");
    p.push(ev("b"), () => {});
    const room = p.whenRoom();
    assert.ok(room, "full at two");
    let roomy = false;
    void room.then(() => {
      roomy = true;
    });
    await tick();
    assert.equal(roomy, false, "the reader waits for a free place");
    log.attempts[0]!.settle(true);
    await tick();
    assert.equal(roomy, true, "a stored event makes room");
    assert.equal(p.whenRoom(), undefined);
    log.attempts[1]!.settle(true);
    await p.settled();
  });

  it("keeps its reader waiting while the head is in flight, however many later events are acked", async () => {
    const log = new FakeLog();
    const p = new OrderedPipeline(log.asPublisher(), 4, new AbortController().signal, unexpected, run);
    let pushed = 0;
    let most = 0;
    const reader = (async () => {
      for (let i = 0; i < 20; i++) {
        // What the session's reader does: one wait, then the next message.
        const room = p.whenRoom();
        if (room) await room;
        p.push(ev(`e${i}`), () => {});
        pushed++;
        most = Math.max(most, p.inFlight);
      }
    })();
    // The head is stored but its ack is late, while every later one is acked.
    await tick();
    log.stored.set("e0", ++log.seq);
    for (let round = 0; round < 10; round++) {
      await tick();
      for (const a of log.attempts.slice(1)) a.settle(true);
    }
    assert.equal(pushed, 4, "the reader waits for the head, not for any ack");
    assert.ok(most <= 4, `at most 4 queued, found ${most}`);
    log.attempts[0]!.settle(true);
    for (let round = 0; round < 30 && pushed < 20; round++) {
      await tick();
      for (const a of log.attempts) a.settle(true);
    }
    await reader;
    await p.settled();
    assert.ok(most <= 4, `at most 4 queued, found ${most}`);
  });

  it("starts what is queued, in order, as the gateway's shared window frees slots", async () => {
    const log = new FakeLog();
    log.publisher.slots = 1;
    const acked: string[] = [];
    const a = new OrderedPipeline(log.asPublisher(), 8, new AbortController().signal, unexpected, run);
    const b = new OrderedPipeline(log.asPublisher(), 8, new AbortController().signal, unexpected, run);
    a.push(ev("a1"), () => acked.push("a1"));
    a.push(ev("a2"), () => acked.push("a2"));
    b.push(ev("b1"), () => acked.push("b1"));
    assert.deepEqual(
      log.attempts.map((x) => x.id),
      ["a1"],
      "one slot: one started",
    );
    // The slot goes to the pipeline that waited first (a, for a2), then to b.
    log.attempts[0]!.settle(true);
    assert.deepEqual(
      log.attempts.map((x) => x.id),
      ["a1", "a2"],
    );
    log.attempts[1]!.settle(true);
    assert.deepEqual(
      log.attempts.map((x) => x.id),
      ["a1", "a2", "b1"],
    );
    log.attempts[2]!.settle(true);
    await a.settled();
    await b.settled();
    assert.deepEqual(acked, ["a1", "a2", "b1"]);
  });

  it("retries a failed publish before the later ones are acked, in order", async () => {
    const log = new FakeLog();
    const acked: string[] = [];
    const p = new OrderedPipeline(log.asPublisher(), 8, new AbortController().signal, unexpected, run);
    for (const id of ["a", "b", "c"]) p.push(ev(id), () => acked.push(id));
    // a and b time out without being stored (the server went away), c too.
    for (const a of log.attempts) a.settle(false);
    await p.settled();
    assert.deepEqual(acked, ["a", "b", "c"]);
    assert.deepEqual(
      [...log.stored.entries()],
      [
        ["a", 1],
        ["b", 2],
        ["c", 3],
      ],
    );
  });

  it("takes a lost ack that was stored as stored (a duplicate on retry)", async () => {
    const log = new FakeLog();
    const acked: string[] = [];
    const p = new OrderedPipeline(log.asPublisher(), 8, new AbortController().signal, unexpected, run);
    p.push(ev("a"), () => acked.push("a"));
    p.push(ev("b"), () => acked.push("b"));
    log.stored.set("a", ++log.seq); // stored, but its ack is lost
    log.attempts[0]!.settle(false);
    log.attempts[1]!.settle(true);
    await p.settled();
    assert.deepEqual(acked, ["a", "b"]);
  });

  it("fails the session when a retry lands after a later event of the session", async () => {
    const log = new FakeLog();
    const acked: string[] = [];
    const { p, failure } = failingPipeline(log);
    p.push(ev("a"), () => acked.push("a"));
    p.push(ev("b"), () => acked.push("b"));
    log.attempts[0]!.settle(false); // rejected outright
    log.attempts[1]!.settle(true); // ... while the next one got through
    await p.settled();
    // a is in the log (its retry stored it); b is too, but before a: not acked.
    assert.deepEqual(acked, ["a"]);
    assert.ok(
      failure() instanceof LogError && (failure() as LogError).code === "unavailable",
      String(failure()),
    );
    await assert.rejects(async () => p.push(ev("c"), () => {}));
  });

  it("lets older publishes settle before sending after a lost connection", async () => {
    const log = new FakeLog();
    const acked: string[] = [];
    const p = new OrderedPipeline(log.asPublisher(), 8, new AbortController().signal, unexpected, run);
    p.push(ev("a"), () => acked.push("a"));
    log.publisher.epoch++;
    p.push(ev("b"), () => acked.push("b"));
    assert.equal(log.attempts.length, 1, "b is not sent while a is unsettled");
    log.attempts[0]!.settle(false);
    await tick();
    assert.equal(log.attempts.length, 2, "b is sent once a was retried");
    log.attempts[1]!.settle(true);
    await p.settled();
    assert.deepEqual(acked, ["a", "b"]);
  });

  it("reports a log that stays unavailable through the retries", async () => {
    const log = new FakeLog();
    log.retryOk = false;
    const { p, failure } = failingPipeline(log);
    const acked: string[] = [];
    p.push(ev("a"), () => acked.push("a"));
    log.attempts[0]!.settle(false);
    await p.settled();
    assert.ok(
      failure() instanceof LogError && (failure() as LogError).message.includes("still down"),
      String(failure()),
    );
    assert.deepEqual(acked, [], "nothing acked: nothing was stored");
  });
});
