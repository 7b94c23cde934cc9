import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { headers } from "@nats-io/transport-node";
import { EventSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import { AppendWindow, isLogError, type Log, type LogError, openLog } from "../../src/log/index.js";
import { uniqueStream } from "../harness/nats.js";
import { testCordon } from "../support/fleet-events.js";
import { sampleEvents } from "../support/sample-events.js";
import { serverSuite, withTestLog } from "../support/suites.js";

describe("log against a real nats-server", () => {
  const env = serverSuite();

  const withLog = (fn: (log: Log) => Promise<void>) => withTestLog(env.server.url, "T", fn);

  it("stores a retried publish once", () =>
    withLog(async (log) => {
      const e = testCordon("evt-retry-1");
      const first = await log.append(e);
      const again = await log.append(e);
      assert.equal(first.duplicate, false);
      assert.equal(again.duplicate, true);
      assert.equal(again.seq, first.seq);
      assert.equal(await log.lastSeq(), 1);
    }));

  it("surfaces an expect-last-subject-sequence conflict as the project's error", () =>
    withLog(async (log) => {
      const pass = sampleEvents().find((e) => e.body.case === "reconcilePass")!;
      const a = await log.append(create(EventSchema, { ...pass, id: "pass-a" }), { expectLastSubjectSeq: 0 });
      // Another writer appends on an unrelated subject: the fence is per subject.
      await log.append(testCordon("unrelated"));
      const b = await log.append(create(EventSchema, { ...pass, id: "pass-b" }), {
        expectLastSubjectSeq: a.seq,
      });
      assert.equal(b.seq, 3);
      // A stale leader still believing the last pass is `a`.
      await assert.rejects(
        log.append(create(EventSchema, { ...pass, id: "pass-c" }), { expectLastSubjectSeq: a.seq }),
        (err: unknown) => isLogError(err, "wrong-last-sequence"),
      );
      assert.equal(await log.lastSubjectSeq(log.subjects.reconciler), 3);
      assert.equal(await log.lastSeq(), 3);
    }));

  it("reads a range of the log back in order, by sequence and by time", () =>
    withLog(async (log) => {
      const events = sampleEvents();
      const seqs: number[] = [];
      for (const e of events) seqs.push((await log.append(e)).seq);
      assert.deepEqual(
        seqs,
        events.map((_, i) => i + 1),
      );

      const all = [];
      for await (const r of log.read()) all.push(r);
      assert.deepEqual(
        all.map((r) => r.event.id),
        events.map((e) => e.id),
      );
      assert.deepEqual(
        all.map((r) => r.seq),
        seqs,
      );
      assert.ok(all.every((r) => r.timeMs > 0));

      const middle = [];
      for await (const r of log.read({ fromSeq: 4, untilSeq: 9 })) middle.push(r.seq);
      assert.deepEqual(middle, [4, 5, 6, 7, 8, 9]);

      const sessions = [];
      for await (const r of log.read({ subjects: [log.subjects.sessions] })) sessions.push(r.event.body.case);
      assert.deepEqual(sessions, ["sessionOpened", "sessionClosed", "duplicateIdentity"]);

      // A filtered read that ends between two matching events: the next match
      // comes past the end, and what came before it is still delivered.
      const sessionSeqs = [];
      for await (const r of log.read({ subjects: [log.subjects.sessions] })) sessionSeqs.push(r.seq);
      const until = sessionSeqs[1]! - 1;
      const upTo = [];
      for await (const r of log.read({ subjects: [log.subjects.sessions], untilSeq: until }))
        upTo.push(r.seq);
      assert.deepEqual(upTo, [sessionSeqs[0]], `sessions up to sequence ${until}`);

      const none = [];
      for await (const r of log.read({ subjects: [`${log.subjects.prefix}.nothing.here`] })) none.push(r);
      assert.equal(none.length, 0);

      const fromTime = [];
      for await (const r of log.read({ fromTimeMs: all[5]!.timeMs })) fromTime.push(r.seq);
      assert.ok(fromTime.length >= events.length - 5 && fromTime.at(-1) === events.length);

      const past = [];
      for await (const r of log.read({ fromSeq: 100 })) past.push(r);
      assert.equal(past.length, 0);
    }));

  it("follows new events until aborted", () =>
    withLog(async (log) => {
      await log.append(testCordon("f-1"));
      const ac = new AbortController();
      const seen: number[] = [];
      const reading = (async () => {
        for await (const r of log.read({ follow: true, signal: ac.signal })) {
          seen.push(r.seq);
          if (seen.length === 3) ac.abort();
        }
      })();
      await log.append(testCordon("f-2"));
      await log.append(testCordon("f-3"));
      await reading;
      assert.deepEqual(seen, [1, 2, 3]);
    }));

  it("gives a freed window slot to the caller that waited for it, before one starting from an ack's handler", () =>
    withLog(async (log) => {
      const window = new AppendWindow(log.appender, 1);
      const order: string[] = [];
      let fromHandler: boolean | undefined;
      const first = new Promise<void>((resolve, reject) => {
        const started = window.tryStartWith(testCordon("w-1"), undefined, {
          appended: () => {
            // The slot was given back: the waiting `start` has it already.
            fromHandler = window.tryStartWith(testCordon("w-3"), undefined, {
              appended: () => order.push("w-3"),
              failed: reject,
            });
            order.push("w-1");
            resolve();
          },
          failed: reject,
        });
        assert.equal(started, true);
      });
      const waiting = window.start(testCordon("w-2"));
      assert.equal(window.inFlight, 1);
      await first;
      assert.equal(fromHandler, false, "the handler found the slot taken by the waiting caller");
      await (await waiting).acked;
      order.push("w-2");
      assert.deepEqual(order, ["w-1", "w-2"]);
      assert.equal(window.inFlight, 0);
    }));

  it("reads in batches what it reads one by one, and hands a following batch over as soon as it arrives", () =>
    withLog(async (log) => {
      const window = new AppendWindow(log.appender, 256);
      const acks: Promise<unknown>[] = [];
      for (let i = 0; i < 3000; i++)
        acks.push((await window.start(testCordon(`b-${i}`, `gpu-${i % 7}`))).acked);
      await Promise.all(acks);
      const one: number[] = [];
      for await (const r of log.read({ batch: 500 })) one.push(r.seq);
      const batched: number[] = [];
      let batches = 0;
      for await (const b of log.readBatches({ batch: 500 })) {
        assert.ok(b.length > 0, "no empty batch");
        batches++;
        for (const r of b) batched.push(r.seq);
      }
      assert.equal(one.length, 3000);
      assert.deepEqual(batched, one);
      assert.ok(batches < 3000, `${batches} batches for 3000 events`);

      // Following: each new event comes in a batch of its own, not held back for more.
      const ac = new AbortController();
      const live: number[][] = [];
      let arrived: () => void = () => {};
      const reading = (async () => {
        for await (const b of log.readBatches({ fromSeq: 3001, follow: true, signal: ac.signal })) {
          live.push(b.map((r) => r.seq));
          arrived();
        }
      })();
      for (const id of ["live-1", "live-2"]) {
        const next = new Promise<void>((resolve) => {
          arrived = resolve;
        });
        await log.append(testCordon(id));
        await next;
      }
      ac.abort();
      await reading;
      assert.deepEqual(live, [[3001], [3002]]);
    }));

  it("ends a following read aborted while it is still opening (no lost abort)", () =>
    withLog(async (log) => {
      // An abort that lands before the consumer exists used to be missed:
      // the read then waited for new events forever and its caller's stop()
      // never returned. Abort at every step of the opening, on an empty
      // stream and on one with events.
      for (const delayMs of [0, 0, 1, 2, 5, 10, 20]) {
        for (let i = 0; i < 5; i++) {
          const ac = new AbortController();
          const reading = (async () => {
            for await (const _ of log.read({ follow: true, signal: ac.signal, fromSeq: 1_000_000 })) {
              // nothing arrives past the end
            }
          })();
          if (delayMs === 0) queueMicrotask(() => ac.abort());
          else setTimeout(() => ac.abort(), delayMs);
          let timer: NodeJS.Timeout | undefined;
          const outcome = await Promise.race([
            reading.then(() => "ended"),
            new Promise((r) => {
              timer = setTimeout(() => r("hung"), 5000);
            }),
          ]);
          clearTimeout(timer);
          assert.equal(outcome, "ended", `a read aborted after ${delayMs} ms ended`);
        }
        await log.append(testCordon(`abort-${delayMs}`));
      }
    }));

  it("reports malformed messages by sequence: stop, or record and continue", () =>
    withLog(async (log) => {
      await log.append(testCordon("m-1"));
      const subject = log.subjects.operator("gpu-a1");
      const h = headers();
      h.set("Nats-Msg-Id", "garbage-1");
      await log.js.publish(subject, new TextEncoder().encode("\u00ff\u00ff garbage"), { headers: h });
      await log.js.publish(subject, new Uint8Array(), { msgID: "empty-1" });
      await log.append(testCordon("m-4"));

      const read: number[] = [];
      await assert.rejects(
        (async () => {
          for await (const r of log.read()) read.push(r.seq);
        })(),
        (err: unknown) =>
          isLogError(err, "malformed") &&
          (err as LogError).seq === 2 &&
          /sequence 2/.test((err as Error).message),
      );
      assert.deepEqual(read, [1]);

      const recorded: number[] = [];
      const good: number[] = [];
      const order: number[] = [];
      for await (const r of log.read({
        onMalformed: (err) => {
          recorded.push(err.seq!);
          order.push(err.seq!);
        },
      })) {
        good.push(r.seq);
        order.push(r.seq);
      }
      assert.deepEqual(recorded, [2, 3]);
      assert.deepEqual(good, [1, 4]);
      assert.deepEqual(order, [1, 2, 3, 4], "good and malformed in log order");
    }));

  it("refuses a stream that exists with other subjects", async () => {
    const name = uniqueStream();
    const log = await openLog({ url: env.server.url, clientName: "test", name, prefix: "first.evt" });
    try {
      await assert.rejects(
        openLog({ url: env.server.url, clientName: "test", name, prefix: "other.evt" }),
        (err: unknown) => isLogError(err, "incompatible-stream") && /other\.evt/.test((err as Error).message),
      );
    } finally {
      await log.jsm.streams.delete(name).catch(() => {});
      await log.close();
    }
  });

  it("reports an unreachable server as unavailable", async () => {
    await assert.rejects(
      openLog({ url: "nats://127.0.0.1:1", clientName: "test", name: uniqueStream() }),
      (err: unknown) => isLogError(err, "unavailable") && /nats-server/.test((err as Error).message),
    );
  });
});
