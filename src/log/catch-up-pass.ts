/**
 * A read's catch-up: what the stream held when the read began, read with a
 * plain pull consumer of its own instead of the library's ordered one, and
 * handed back to the ordered consumer (reader.ts) for everything else.
 *
 * Why: the ordered consumer parses every message's reply subject into a
 * delivery-info object (11 tokens, seven numbers) to check its order, and
 * the reader then read the sequence and time from it; that is about 1 µs of
 * a catch-up's ~8 µs per event, as much as the fold of many events
 * (docs/PERFORMANCE.md, "Replay"). Here the reply subject is read once, in
 * place (`ackReply`), for the sequence, the time, the order check and what
 * is pending.
 *
 * It only reads what is plainly there: an ephemeral consumer without acks
 * (as the ordered consumer's), from the read's first sequence, that must
 * deliver its messages one after another (its own delivery sequence 1, 2,
 * 3…). Anything else ends the pass where it got to, and the ordered
 * consumer goes on from the next sequence with all its recovery: a gap in
 * the delivery sequence (the consumer was reset), the consumer going quiet
 * or failing, nothing left pending (the end of what its replica holds),
 * the consumer not made at all. A pass ends the read only when it
 * delivered the read's last sequence (`stopAt`), or when the caller
 * aborted.
 */
import {
  AckPolicy,
  type Consumer,
  type ConsumerMessages,
  DeliverPolicy,
  type JsMsg,
} from "@nats-io/jetstream";
import { nanos, nuid } from "@nats-io/transport-node";
import { ackReply } from "./ack-reply.js";
import { admit, RecordBatch, type StoredMessage, tell } from "./admit.js";
import { IDLE_HEARTBEAT_MS, Inbox, READ_BATCH, READ_EXPIRES_MS, ReadWatchdog } from "./consumer-feed.js";
import type { ConsumerRead, LogRecord } from "./reader.js";

/** A read with fewer than this many messages to catch up on goes to the ordered consumer directly. */
export const CATCH_UP_MIN = 1_000;

/**
 * An idle catch-up consumer is removed by the server after this long (its
 * reader is gone); the pass removes its own when it ends.
 */
const INACTIVE_MS = 30_000;

/** How a catch-up pass ended: the read is over, or the ordered consumer goes on after `lastDelivered`. */
export interface CatchUpEnd {
  outcome: "end" | "continue";
  /** The last sequence it delivered (0: none). */
  lastDelivered: number;
}

/** Whether a read from `fromSeq` catches up with a pass of its own first. */
export function catchesUp(read: ConsumerRead, fromSeq: number): boolean {
  return read.endSeq - fromSeq + 1 >= CATCH_UP_MIN;
}

export async function* catchUpPass(
  read: ConsumerRead,
  fromSeq: number,
): AsyncGenerator<LogRecord[], CatchUpEnd> {
  const { opts, layout } = read;
  let lastDelivered = 0;
  const ended = (outcome: CatchUpEnd["outcome"]): CatchUpEnd => ({ outcome, lastDelivered });
  const name = `llmgw_catchup_${nuid.next()}`;
  let consumer: Consumer;
  try {
    const made = await read.jsm.consumers.add(read.stream, {
      name,
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: fromSeq,
      ack_policy: AckPolicy.None,
      inactive_threshold: nanos(INACTIVE_MS),
      num_replicas: 1,
      mem_storage: true,
      ...(opts.subjects && opts.subjects.length > 0 ? { filter_subjects: opts.subjects } : {}),
    });
    // Nothing to deliver (a filter nothing matches, or a replica behind):
    // whether the read is over is the ordered consumer's to find out; this
    // consumer would only wait.
    if (made.num_pending === 0) {
      void removeConsumer(read, name);
      return ended("continue");
    }
    consumer = await read.js.consumers.get(read.stream, name);
  } catch {
    // Whatever stopped it (a cluster electing, the stream's consumer limit),
    // the ordered consumer meets it too and knows what to do.
    void removeConsumer(read, name);
    return ended("continue");
  }
  const inbox = new Inbox<JsMsg>();
  let messages: ConsumerMessages | undefined;
  let watchdog: ReadWatchdog | undefined;
  const onAbort = () => inbox.close(undefined);
  try {
    if (opts.signal?.aborted) return ended("end");
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    try {
      messages = await consumer.consume({
        max_messages: opts.batch ?? READ_BATCH,
        expires: READ_EXPIRES_MS,
        idle_heartbeat: IDLE_HEARTBEAT_MS,
        callback: (m) => inbox.put(m),
      });
    } catch {
      return ended("continue");
    }
    const closing = messages;
    void closing.closed().then(
      (err) => inbox.close(err ?? undefined),
      (err: unknown) => inbox.close(err instanceof Error ? err : new Error(String(err))),
    );
    watchdog = new ReadWatchdog(closing, read.stream);
    void handOverOnTrouble(closing, inbox);
    let expected = 1;
    for (;;) {
      let arrived: JsMsg[] | undefined;
      try {
        arrived = await inbox.take();
      } catch {
        // The consumer failed or went quiet: the ordered consumer goes on.
        return ended("continue");
      }
      if (opts.signal?.aborted) return ended("end");
      if (arrived === undefined) return ended("continue");
      const batch = new RecordBatch();
      for (const m of arrived) {
        // JsMsg declares no `reply`, but the library's message has it (streamTimeMs reads it too).
        const reply = (m as { reply?: unknown }).reply;
        const r = typeof reply === "string" ? ackReply(reply) : undefined;
        if (r === undefined || r.consumerSeq !== expected || r.streamSeq <= lastDelivered) {
          const held = batch.take();
          if (held) yield held;
          return ended("continue");
        }
        expected++;
        if (r.streamSeq > read.stopAt) {
          // Past the read's last sequence: everything up to it was delivered.
          const held = batch.take();
          if (held) yield held;
          return ended("end");
        }
        lastDelivered = r.streamSeq;
        const stored: StoredMessage = { seq: r.streamSeq, subject: m.subject, data: m.data };
        const admitted = admit(layout, stored, r.timeMs, opts);
        if (admitted.kind === "record") batch.push(admitted.record);
        else if (admitted.kind !== "skip") {
          // In log order: what came before it is handed over first.
          const before = batch.take();
          if (before) yield before;
          tell(admitted, stored, opts);
        }
        if (r.streamSeq >= read.stopAt || r.pending === 0) {
          const held = batch.take();
          if (held) yield held;
          return ended(r.streamSeq >= read.stopAt ? "end" : "continue");
        }
      }
      watchdog.alive();
      const held = batch.take();
      if (held) yield held;
    }
  } finally {
    watchdog?.stop();
    opts.signal?.removeEventListener("abort", onAbort);
    messages?.stop();
    void removeConsumer(read, name);
  }
}

/**
 * What the library tells of a consumer that is gone or silent; it would
 * keep asking (the ordered consumer would make another), where the pass
 * hands over at once.
 */
const TROUBLE: ReadonlySet<string> = new Set([
  "consumer_deleted",
  "consumer_not_found",
  "stream_not_found",
  "heartbeats_missed",
]);

/** Ends the pass (the ordered consumer goes on) at the first sign of trouble with its consumer. */
async function handOverOnTrouble(messages: ConsumerMessages, inbox: Inbox<JsMsg>): Promise<void> {
  try {
    for await (const s of messages.status()) {
      if (TROUBLE.has(s.type)) {
        inbox.close(new Error(`catch-up consumer: ${s.type}`));
        messages.stop();
        return;
      }
    }
  } catch {
    // The pass ended first.
  }
}

/** Removes the pass's consumer; one already gone (or a server that cannot say) is left to its inactivity limit. */
async function removeConsumer(read: ConsumerRead, name: string): Promise<void> {
  try {
    await read.jsm.consumers.delete(read.stream, name);
  } catch {
    // Removed by the server after INACTIVE_MS.
  }
}
