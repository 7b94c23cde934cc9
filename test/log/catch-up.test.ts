/**
 * A read's catch-up pass (src/log/catch-up-pass.ts) against a real
 * nats-server: a read with at least CATCH_UP_MIN events to catch up on
 * reads them with a pull consumer of its own, then hands over to the
 * ordered consumer. Whatever happens to that pass, the read delivers every
 * event once, in log order, with what the ordered consumer alone would.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { encodeEvent } from "../../src/codec/index.js";
import { CATCH_UP_MIN } from "../../src/log/catch-up-pass.js";
import { AppendWindow, isLogError, type Log, type LogRecord, type ReadOptions } from "../../src/log/index.js";
import { testCordon } from "../support/fleet-events.js";
import { serverSuite, withTestLog } from "../support/suites.js";

const N = CATCH_UP_MIN * 2 + 500;

/** `n` cordons of alternating nodes, appended with 256 in flight. */
async function fill(log: Log, n: number, tag: string): Promise<void> {
  const window = new AppendWindow(log.appender, 256);
  const acks: Promise<unknown>[] = [];
  for (let i = 0; i < n; i++) {
    const { acked } = await window.start(testCordon(`${tag}-${i}`, i % 2 === 0 ? "gpu-a1" : "gpu-b1"));
    acks.push(acked);
  }
  await Promise.all(acks);
}

async function consumers(log: Log): Promise<string[]> {
  const names: string[] = [];
  for await (const c of log.jsm.consumers.list(log.stream)) names.push(c.name);
  return names;
}

async function catchUpConsumers(log: Log): Promise<string[]> {
  return (await consumers(log)).filter((n) => n.startsWith("llmgw_catchup_"));
}

/** Waits until the stream has no catch-up consumer left (each pass removes its own as it ends). */
async function noCatchUpConsumerLeft(log: Log): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if ((await catchUpConsumers(log)).length === 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.deepEqual(await catchUpConsumers(log), [], "the catch-up pass removed its consumer");
}

const brief = (r: LogRecord) => `${r.seq}:${r.event.id}`;

describe("log: a read's catch-up pass against a real nats-server", () => {
  const env = serverSuite();
  const withLog = (fn: (log: Log) => Promise<void>) => withTestLog(env.server.url, "C", fn);

  it("reads what the stream held with a consumer of its own, then hands over: every event once, in order, with the times a direct read gives; the pass removes its consumer", () =>
    withLog(async (log) => {
      await fill(log, N, "e");
      const direct: LogRecord[] = [];
      for await (const r of log.read({ via: "direct" })) direct.push(r);
      assert.equal(direct.length, N);

      const read: LogRecord[] = [];
      let midway: string[] | undefined;
      for await (const batch of log.readBatches({ batch: 500 })) {
        read.push(...batch);
        if (midway === undefined && read.length >= N / 2) midway = await consumers(log);
      }
      // Halfway through, the pass's own consumer is the stream's only one: no ordered consumer took over.
      assert.equal(midway?.length, 1, `consumers halfway: ${midway}`);
      assert.match(midway?.[0] ?? "", /^llmgw_catchup_/);
      assert.deepEqual(read.map(brief), direct.map(brief));
      assert.deepEqual(
        read.map((r) => r.timeMs),
        direct.map((r) => r.timeMs),
      );
      assert.deepEqual(
        read.map((r) => r.subject),
        direct.map((r) => r.subject),
      );
      await noCatchUpConsumerLeft(log);
    }));

  it("given forged and malformed messages among many, filtered or not, then they are told in log order as the ordered consumer tells them", () =>
    withLog(async (log) => {
      await fill(log, CATCH_UP_MIN, "a");
      // A cordon forged onto a session subject: stored, never yielded.
      await log.js.publish(log.subjects.session("forged"), encodeEvent(testCordon("forged")));
      await log.js.publish(log.subjects.operator("gpu-a1"), new TextEncoder().encode("\u00ff\u00ff garbage"));
      await fill(log, CATCH_UP_MIN, "b");
      const forgedSeq = CATCH_UP_MIN + 1;
      const garbageSeq = CATCH_UP_MIN + 2;

      const seen = async (opts: ReadOptions) => {
        const order: string[] = [];
        for await (const r of log.read({
          ...opts,
          onRefused: (x) => order.push(`refused ${x.seq}`),
          onMalformed: (err) => order.push(`malformed ${err.seq}`),
        }))
          order.push(`${r.seq}`);
        return order;
      };
      const all = await seen({});
      assert.equal(all.length, 2 * CATCH_UP_MIN + 2);
      assert.equal(all[CATCH_UP_MIN], `refused ${forgedSeq}`);
      assert.equal(all[CATCH_UP_MIN + 1], `malformed ${garbageSeq}`);
      assert.deepEqual(
        all.filter((x) => !x.includes(" ")).map(Number),
        [...Array(2 * CATCH_UP_MIN + 2).keys()]
          .map((i) => i + 1)
          .filter((s) => s !== forgedSeq && s !== garbageSeq),
      );

      // Filtered to one node's subject: the other node's cordons and the forged event are not delivered at all.
      const filtered = await seen({ subjects: [log.subjects.operator("gpu-a1")] });
      assert.ok(filtered.includes(`malformed ${garbageSeq}`));
      assert.ok(!filtered.some((x) => x.startsWith("refused")));
      assert.equal(filtered.length, CATCH_UP_MIN + 1);

      // Without onMalformed the read stops at the garbage, naming its sequence, after everything before it.
      const before: number[] = [];
      await assert.rejects(
        (async () => {
          for await (const r of log.read()) before.push(r.seq);
        })(),
        (err: unknown) => isLogError(err, "malformed") && (err as { seq?: number }).seq === garbageSeq,
      );
      assert.equal(before.length, CATCH_UP_MIN);
      await noCatchUpConsumerLeft(log);
    }));

  it("given its consumer removed mid-read (as a cluster member's death removes it), then the ordered consumer goes on from the next sequence: nothing lost, nothing twice", () =>
    withLog(async (log) => {
      await fill(log, N, "d");
      const seqs: number[] = [];
      let removed = false;
      for await (const batch of log.readBatches({ batch: 200 })) {
        for (const r of batch) seqs.push(r.seq);
        if (!removed) {
          const [name] = await catchUpConsumers(log);
          assert.ok(name, "a catch-up consumer reads");
          await log.jsm.consumers.delete(log.stream, name);
          removed = true;
        }
      }
      assert.ok(removed);
      assert.deepEqual(
        seqs,
        [...Array(N).keys()].map((i) => i + 1),
      );
    }));

  it("stops at the sequence asked for, and a following read goes on with what is appended after it began", () =>
    withLog(async (log) => {
      await fill(log, N, "f");
      const until: number[] = [];
      for await (const r of log.read({ untilSeq: CATCH_UP_MIN + 7 })) until.push(r.seq);
      assert.deepEqual(
        until,
        [...Array(CATCH_UP_MIN + 7).keys()].map((i) => i + 1),
      );

      const ac = new AbortController();
      const followed: number[] = [];
      let appended = false;
      const more = 300;
      for await (const batch of log.readBatches({ follow: true, signal: ac.signal, batch: 500 })) {
        for (const r of batch) followed.push(r.seq);
        if (!appended) {
          // Appended while the read catches up: read once, after what came before.
          appended = true;
          void fill(log, more, "g");
        }
        if (followed.length >= N + more) ac.abort();
      }
      assert.deepEqual(
        followed,
        [...Array(N + more).keys()].map((i) => i + 1),
      );
      await noCatchUpConsumerLeft(log);
    }));

  it("given a filter that nothing in many messages matches, then a read that does not follow ends with nothing, and one that follows gets what comes", () =>
    withLog(async (log) => {
      await fill(log, N, "n");
      const subjects = [log.subjects.operator("gpu-zz")];
      const none: number[] = [];
      for await (const r of log.read({ subjects })) none.push(r.seq);
      assert.deepEqual(none, []);
      const ac = new AbortController();
      const got: string[] = [];
      const following = (async () => {
        for await (const r of log.read({ subjects, follow: true, signal: ac.signal })) {
          got.push(r.event.id);
          ac.abort();
        }
      })();
      await log.append(testCordon("zz-1", "gpu-zz"));
      await following;
      assert.deepEqual(got, ["zz-1"]);
      await noCatchUpConsumerLeft(log);
    }));

  it("ends when the caller aborts during the catch-up, and removes its consumer", () =>
    withLog(async (log) => {
      await fill(log, N, "x");
      const ac = new AbortController();
      let got = 0;
      for await (const batch of log.readBatches({ follow: true, signal: ac.signal, batch: 200 })) {
        got += batch.length;
        ac.abort();
      }
      assert.ok(got > 0 && got < N, `read ${got} before the abort`);
      await noCatchUpConsumerLeft(log);
    }));
});
