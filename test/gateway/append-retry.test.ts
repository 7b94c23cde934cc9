import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { appendRetrying, type RetryClock } from "../../src/gateway/append-retry.js";
import { EventSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import { type Appended, isLogError, LogError } from "../../src/log/index.js";

/** A clock that only moves when the loop sleeps, recording each wait. */
function fakeClock(): RetryClock & { waits: number[] } {
  let now = 0;
  const waits: number[] = [];
  return {
    waits,
    now: () => now,
    sleep: async (ms) => {
      waits.push(ms);
      now += ms;
    },
  };
}

const event = create(EventSchema, { id: "e-1" });
const down = () => Promise.reject(new LogError("unavailable", "no ack"));

describe("gateway: appendRetrying (the retry policy the gateway and the simulation share)", () => {
  it("retries an unavailable log with the same event after 50 ms doubling to 1 s, until it takes it", async () => {
    const clock = fakeClock();
    const seen: string[] = [];
    let calls = 0;
    const a = await appendRetrying(
      event,
      (timeoutMs) => {
        seen.push(`${event.id}@${timeoutMs}`);
        return ++calls < 8 ? down() : Promise.resolve<Appended>({ seq: 7, duplicate: true });
      },
      { clock, timeoutMs: 5_000, limitMs: 30_000 },
    );
    assert.deepEqual(a, { seq: 7, duplicate: true });
    assert.deepEqual(clock.waits, [50, 100, 200, 400, 800, 1000, 1000]);
    assert.equal(seen.length, 8);
    assert.ok(seen.every((s) => s.startsWith("e-1@")));
  });

  it("gives up with an unavailable error naming the event once the limit would pass", async () => {
    const clock = fakeClock();
    const retries: number[] = [];
    await assert.rejects(
      appendRetrying(event, down, {
        clock,
        timeoutMs: 5_000,
        limitMs: 1_000,
        onRetry: (n) => retries.push(n),
      }),
      (err: unknown) =>
        isLogError(err, "unavailable") && /event e-1 within \d+ ms \(5 attempts\)/.test(err.message),
    );
    assert.deepEqual(retries, [1, 2, 3, 4]);
  });

  it("does not retry other errors, nor once the signal aborted", async () => {
    await assert.rejects(
      appendRetrying(event, () => Promise.reject(new LogError("wrong-last-sequence", "fenced")), {
        clock: fakeClock(),
        timeoutMs: 5_000,
        limitMs: 30_000,
      }),
      (err: unknown) => isLogError(err, "wrong-last-sequence"),
    );
    const stop = new AbortController();
    stop.abort();
    const clock = fakeClock();
    await assert.rejects(
      appendRetrying(event, down, { clock, timeoutMs: 5_000, limitMs: 30_000, signal: stop.signal }),
      (err: unknown) => isLogError(err, "unavailable"),
    );
    assert.deepEqual(clock.waits, []);
  });
});
