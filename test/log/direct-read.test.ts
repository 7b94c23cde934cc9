import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { encodeEvent } from "../../src/codec/index.js";
import {
  isLogError,
  type Log,
  type LogRecord,
  type ReadOptions,
  readDirectBatches,
} from "../../src/log/index.js";
import { testCordon } from "../support/fleet-events.js";
import { sampleEvents } from "../support/sample-events.js";
import { serverSuite, withTestLog } from "../support/suites.js";

interface Seen {
  records: LogRecord[];
  /** Everything in the order handed over: "r<seq>" yielded, "x<seq>" refused, "m<seq>" malformed. */
  order: string[];
}

async function readAll(log: Log, via: "consumer" | "direct", opts: ReadOptions = {}): Promise<Seen> {
  const seen: Seen = { records: [], order: [] };
  for await (const batch of log.readBatches({
    ...opts,
    via,
    onRefused: (r) => seen.order.push(`x${r.seq}`),
    onMalformed: (_e, raw) => seen.order.push(`m${raw.seq}`),
  })) {
    for (const r of batch) {
      seen.records.push(r);
      seen.order.push(`r${r.seq}`);
    }
  }
  return seen;
}

describe("the direct-get reader (real nats-server, no consumer)", () => {
  const env = serverSuite();
  const withLog = (fn: (log: Log) => Promise<void>) => withTestLog(env.server.url, "D", fn);

  it("yields what the consumer reader yields, refusals and malformed messages in the same order", () =>
    withLog(async (log) => {
      for (const e of sampleEvents()) await log.append(e);
      // A cordon forged onto a session subject: stored, never yielded.
      await log.js.publish(log.subjects.session("forged"), encodeEvent(testCordon("forged")));
      // Bytes that are no event.
      await log.js.publish(log.subjects.node("gpu-x"), new Uint8Array([0xff, 0x01, 0x02]));
      for (let i = 0; i < 3; i++) await log.append(testCordon(`after-${i}`));
      const consumer = await readAll(log, "consumer");
      const direct = await readAll(log, "direct");
      assert.ok(
        consumer.order.some((o) => o.startsWith("x")),
        "the forged cordon is refused",
      );
      assert.ok(
        consumer.order.some((o) => o.startsWith("m")),
        "the bad bytes are malformed",
      );
      assert.deepEqual(direct.order, consumer.order);
      assert.deepEqual(direct.records, consumer.records);

      // A range, a start time and a subject filter.
      const range = { fromSeq: 3, untilSeq: 9 };
      assert.deepEqual(
        (await readAll(log, "direct", range)).order,
        (await readAll(log, "consumer", range)).order,
      );
      const fromTimeMs = consumer.records[4]!.timeMs;
      assert.deepEqual(
        (await readAll(log, "direct", { fromTimeMs })).order,
        (await readAll(log, "consumer", { fromTimeMs })).order,
      );
      const nodes = { subjects: [`${log.subjects.prefix}.operator.*`] };
      const filtered = await readAll(log, "direct", nodes);
      assert.ok(filtered.records.length >= 3);
      assert.deepEqual(filtered.order, (await readAll(log, "consumer", nodes)).order);
      // A batch smaller than the log: the same, over several gets.
      assert.deepEqual((await readAll(log, "direct", { batch: 2 })).order, consumer.order);
    }));

  it("follows: an event appended after the end is yielded, and the read stops on abort", () =>
    withLog(async (log) => {
      await log.append(testCordon("first"));
      const abort = new AbortController();
      const got: string[] = [];
      const reading = (async () => {
        for await (const batch of readDirectBatches(log.jsm, log.stream, log.subjects, {
          follow: true,
          signal: abort.signal,
          pollMs: 20,
        })) {
          for (const r of batch) got.push(r.event.id);
          if (got.length === 3) abort.abort();
        }
      })();
      await log.append(testCordon("second"));
      await new Promise((r) => setTimeout(r, 100));
      await log.append(testCordon("third"));
      await reading;
      assert.deepEqual(got, ["first", "second", "third"]);
    }));

  it("follows from a start time after every stored event: only what comes after", () =>
    withLog(async (log) => {
      for (let i = 0; i < 3; i++) await log.append(testCordon(`old-${i}`));
      const abort = new AbortController();
      const got: string[] = [];
      const reading = (async () => {
        for await (const batch of readDirectBatches(log.jsm, log.stream, log.subjects, {
          follow: true,
          fromTimeMs: Date.now() + 1,
          signal: abort.signal,
          pollMs: 20,
        })) {
          for (const r of batch) got.push(r.event.id);
          abort.abort();
        }
      })();
      await new Promise((r) => setTimeout(r, 100));
      await log.append(testCordon("new"));
      await reading;
      assert.deepEqual(got, ["new"]);
    }));

  it("merges several subject filters in log order, overlapping ones without duplicates", () =>
    withLog(async (log) => {
      for (let i = 0; i < 5; i++) {
        await log.append(testCordon(`a-${i}`, "gpu-a"));
        await log.append(testCordon(`b-${i}`, "gpu-b"));
        await log.append(testCordon(`c-${i}`, "gpu-c"));
      }
      const subjects = [
        log.subjects.operator("gpu-a"),
        log.subjects.operator("gpu-c"),
        `${log.subjects.prefix}.operator.*`,
      ];
      for (const batch of [1, 2, 1000]) {
        const direct = await readAll(log, "direct", { subjects, batch });
        assert.equal(direct.records.length, 15, `batch ${batch}`);
        assert.deepEqual(
          direct.order,
          // Every event here is on an operator subject: all of them, once, in order.
          (await readAll(log, "consumer")).order,
          `batch ${batch}`,
        );
      }
      const two = [log.subjects.operator("gpu-a"), log.subjects.operator("gpu-c")];
      const direct = await readAll(log, "direct", { subjects: two, batch: 2 });
      assert.deepEqual(
        direct.records.map((r) => r.event.id),
        ["a-0", "c-0", "a-1", "c-1", "a-2", "c-2", "a-3", "c-3", "a-4", "c-4"],
      );
    }));

  it("names a stream that allows no direct gets", () =>
    withLog(async (log) => {
      await log.append(testCordon("one"));
      await log.jsm.streams.update(log.stream, { allow_direct: false });
      await assert.rejects(
        readAll(log, "direct"),
        (err: unknown) => isLogError(err, "incompatible-stream") && /--allow-direct/.test(err.message),
      );
    }));
});
