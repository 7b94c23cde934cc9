import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { AckedPublisher } from "../../src/log/acked-publish.js";
import { isLogError, LogError } from "../../src/log/index.js";
import { type NatsServer, startServer, uniqueStream } from "../harness/nats.js";

/**
 * The log's publish path against a real nats-server: every outcome the
 * client's own `js.publish` reports, reported the same way, with one reply
 * subscription for all publishes.
 */
describe("acked publishes over one reply subscription", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  async function withStream(fn: (nc: NatsConnection, stream: string, subject: string) => Promise<void>) {
    const nc = await connect({ servers: server.url, noAsyncTraces: true });
    const stream = uniqueStream();
    const subject = `ap${Math.random().toString(36).slice(2, 8)}.evt`;
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: stream, subjects: [`${subject}.>`] });
    try {
      await fn(nc, stream, subject);
    } finally {
      await jsm.streams.delete(stream).catch(() => {});
      await nc.close();
    }
  }

  const bytes = (s: string) => new TextEncoder().encode(s);

  it("stores many pipelined publishes in order and reports a retried one as a duplicate", () =>
    withStream(async (nc, stream, subject) => {
      const p = new AckedPublisher(nc);
      const acks = await Promise.all(
        Array.from({ length: 500 }, (_, i) =>
          p.publish(`${subject}.a`, bytes(`m${i}`), `id-${i}`, { stream }, 5000),
        ),
      );
      assert.deepEqual(
        acks.map((a) => a.seq),
        Array.from({ length: 500 }, (_, i) => i + 1),
      );
      assert.ok(acks.every((a) => a.stream === stream && a.duplicate === false));
      const again = await p.publish(`${subject}.a`, bytes("m7"), "id-7", { stream }, 5000);
      assert.deepEqual({ seq: again.seq, duplicate: again.duplicate }, { seq: 8, duplicate: true });
      assert.equal(p.inFlight, 0);
    }));

  it("fails a broken fence with wrong-last-sequence and a wrong stream name with the server's words", () =>
    withStream(async (nc, stream, subject) => {
      const p = new AckedPublisher(nc);
      const first = await p.publish(`${subject}.f`, bytes("a"), "f-1", { stream, lastSubjectSeq: 0 }, 5000);
      await p.publish(`${subject}.f`, bytes("b"), "f-2", { stream, lastSubjectSeq: first.seq }, 5000);
      await assert.rejects(
        p.publish(`${subject}.f`, bytes("c"), "f-3", { stream, lastSubjectSeq: first.seq }, 5000),
        (err: unknown) => isLogError(err, "wrong-last-sequence") && /wrong last sequence/i.test(String(err)),
      );
      await assert.rejects(
        p.publish(`${subject}.f`, bytes("d"), "f-4", { stream: "NOT_THIS_ONE" }, 5000),
        (err: unknown) => err instanceof LogError && /expected stream/i.test(err.message),
      );
    }));

  it("rejects a message id that would break the headers, and stores nothing of it", () =>
    withStream(async (nc, stream, subject) => {
      const p = new AckedPublisher(nc);
      await assert.rejects(
        p.publish(`${subject}.h`, bytes("x"), "id\r\nNats-Expected-Stream: other", { stream }, 5000),
        (err: unknown) => isLogError(err, "invalid-argument"),
      );
      const ok = await p.publish(`${subject}.h`, bytes("y"), "id-ok", { stream }, 5000);
      assert.equal(ok.seq, 1, "only the valid publish is in the stream");
    }));

  it("reports a subject no stream takes as unavailable at once, not after the timeout", () =>
    withStream(async (nc, stream) => {
      const p = new AckedPublisher(nc);
      const t = performance.now();
      await assert.rejects(
        p.publish("nobody.listens.here", bytes("x"), "n-1", { stream }, 60_000),
        (err: unknown) => isLogError(err, "unavailable") && /no stream answered/.test((err as Error).message),
      );
      // A liveness bound: the deadline is 60 s, the server answers at once.
      assert.ok(
        performance.now() - t < 30_000,
        "the no-responders answer did not come: the publish hung until its deadline",
      );
    }));

  it("times out a publish nobody acks, and ignores the ack if it comes later", () =>
    withStream(async (nc, stream, subject) => {
      // A plain subscriber takes the subject and answers late, after the deadline.
      const late = await connect({ servers: server.url });
      try {
        let answered!: () => void;
        const lateAnswer = new Promise<void>((r) => {
          answered = r;
        });
        late.subscribe("slow.subject", {
          callback: (_err, m) => {
            setTimeout(() => {
              m.respond(bytes('{"stream":"X","seq":1}'));
              void late.flush().then(answered);
            }, 400);
          },
        });
        await late.flush();
        const p = new AckedPublisher(nc);
        await assert.rejects(
          p.publish("slow.subject", bytes("x"), "t-1", { stream }, 100),
          (err: unknown) =>
            isLogError(err, "unavailable") && /no publish ack within 100 ms/.test(String(err)),
        );
        assert.equal(p.inFlight, 0);
        // The server has the late ack (the responder's flush) and has delivered
        // it to the publisher's connection before answering this flush; it must
        // not be taken for the next publish's ack (the late one says stream "X").
        await lateAnswer;
        await nc.flush();
        const next = await p.publish(`${subject}.n`, bytes("n"), "n-1", { stream }, 5000);
        assert.deepEqual({ stream: next.stream, seq: next.seq }, { stream, seq: 1 });
      } finally {
        await late.close();
      }
    }));

  it("times out a publish started from the failure handler of another when the ack subscription ended", async () => {
    // The subscription's end is hard to bring about on a real server (a
    // permissions change on the reply inbox): a connection of the test's own
    // hands it an error. What matters is the publisher's own bookkeeping.
    let ackCallback: ((err: Error | null, msg: unknown) => void) | undefined;
    const never = new Promise<never>(() => {});
    const nc = {
      subscribe: (_: string, opts: { callback: typeof ackCallback }) => {
        ackCallback = opts.callback;
      },
      status: () => ({ [Symbol.asyncIterator]: () => ({ next: () => never }) }),
      closed: () => never,
      isClosed: () => false,
      publish: () => {},
    } as unknown as NatsConnection;
    const p = new AckedPublisher(nc);
    const second = new Promise<unknown>((resolve) => {
      p.send("s.a", bytes("a"), "f-1", { stream: "S" }, 60_000, {
        acked: () => resolve(new Error("the first publish was acked")),
        // A freed window slot is handed on from here: the next publish starts at once.
        failed: () =>
          p.send("s.b", bytes("b"), "f-2", { stream: "S" }, 50, {
            acked: () => resolve(new Error("the second publish was acked")),
            failed: (err) => resolve(err),
          }),
      });
    });
    ackCallback?.(new Error("subscription ended"), undefined);
    const outcome = await Promise.race([second, new Promise((r) => setTimeout(() => r("never told"), 2000))]);
    assert.ok(
      isLogError(outcome, "unavailable") && /no publish ack within 50 ms/.test(String(outcome)),
      `the second publish: ${String(outcome)}`,
    );
  });

  it("fails what is in flight, and what comes after, once the connection is closed", async () => {
    const nc = await connect({ servers: server.url, noAsyncTraces: true });
    const p = new AckedPublisher(nc);
    const late = await connect({ servers: server.url });
    try {
      late.subscribe("never.answered", { callback: () => {} });
      await late.flush();
      const pending = p.publish("never.answered", bytes("x"), "c-1", { stream: "S" }, 60_000);
      await nc.flush();
      await nc.close();
      await assert.rejects(pending, (err: unknown) => isLogError(err, "unavailable"));
      await assert.rejects(
        p.publish("never.answered", bytes("y"), "c-2", { stream: "S" }, 1000),
        (err: unknown) => isLogError(err, "unavailable") && /closed/.test(String(err)),
      );
    } finally {
      await late.close();
    }
  });
});
