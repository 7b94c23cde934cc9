import {
  type Consumer,
  DeliverPolicy,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from "@nats-io/jetstream";
import type { Event } from "../gen/llmgw/v1/events_pb.js";
import { ackReply } from "./ack-reply.js";
import { admit, RecordBatch, tell } from "./admit.js";
import { catchesUp, catchUpPass } from "./catch-up-pass.js";
import { IDLE_HEARTBEAT_MS, Inbox, READ_BATCH, READ_EXPIRES_MS, ReadWatchdog } from "./consumer-feed.js";
import { readDirectBatches } from "./direct-read.js";
import { consumerInfo, type EndCheck, nothingLeft } from "./end-check.js";
import { LogError } from "./errors.js";
import { afterLagging, onDelivery, readStop } from "./read-end.js";
import { leaderInfo, whileElecting } from "./stream-leader.js";
import type { RefusedEvent } from "./subject-kinds.js";
import type { Subjects } from "./subjects.js";

/** One event as read from the log. */
export interface LogRecord {
  /** Stream sequence. */
  seq: number;
  /** The stream's own time for the message (ms since the epoch): the time projections use. */
  timeMs: number;
  subject: string;
  event: Event;
}

export interface ReadOptions {
  /** First sequence to read (default 1). Ignored when `fromTimeMs` is set. */
  fromSeq?: number;
  /** Start at the first event stored at or after this time (ms since the epoch). */
  fromTimeMs?: number;
  /**
   * Last sequence to read. Without it and without `follow`, reading stops at
   * the stream's last sequence at the time the read started.
   */
  untilSeq?: number;
  /** Keep waiting for new events after the end (until `signal` aborts). */
  follow?: boolean;
  /** Only these subjects (wildcards allowed). Default: every event. */
  subjects?: string[];
  /**
   * What to do with bytes that are not an event. Without it, reading stops
   * with a `malformed` LogError naming the sequence. With it, the error is
   * handed here and reading continues: the caller records it, nothing is
   * skipped silently.
   */
  onMalformed?: (err: LogError, raw: { seq: number; subject: string; data: Uint8Array }) => void;
  /**
   * Told of each event stored on a subject its kind may not be written to
   * (src/log/subject-kinds.ts): such an event is never yielded, whatever
   * the caller; here it is handed over in log order, for the caller to
   * count, log or show. Without it, it is passed over all the same.
   */
  onRefused?: (refused: RefusedEvent) => void;
  /** Stops a following read. */
  signal?: AbortSignal;
  /**
   * Messages a pull asks for (default 10 000; the next pull goes out when
   * half have arrived). Each pull is a request and a socket write: with 512 a
   * catch-up spent a tenth of its time writing pulls.
   */
  batch?: number;
  /**
   * How the log is read: with an ordered consumer (the default), or with
   * batched direct gets and no consumer at all (src/log/direct-read.ts),
   * as the reader and router roles must (docs/SECURITY.md, "Consumers").
   * A direct read takes at most one subject filter.
   */
  via?: "consumer" | "direct";
}

/**
 * Reads the log in order with an ordered consumer and yields decoded events
 * with their sequence and time. `layout` is the log's subjects: an event is
 * yielded only from the subject its kind is written to (see `onRefused`).
 */
export async function* readEvents(
  js: JetStreamClient,
  jsm: JetStreamManager,
  stream: string,
  layout: Subjects,
  opts: ReadOptions = {},
): AsyncGenerator<LogRecord> {
  for await (const batch of readEventBatches(js, jsm, stream, layout, opts)) yield* batch;
}

/**
 * `readEvents` a batch at a time: each batch is every event that had
 * arrived when the previous one was taken (never empty, never held back
 * waiting for more). A fold that takes batches pays the step of an async
 * iteration once per batch instead of once per event: at read speed that
 * step costs as much as the fold of an event (docs/ARCHITECTURE.md,
 * "Replay at read speed").
 *
 * One consumer reads at a time (`consumerPass`), usually the only one. A
 * consumer placed on a replica still catching up is given up for a new one
 * (placed anew) after what it delivered (see `nothingLeft`); `afterLagging`
 * decides when the read gives up instead.
 */
export async function* readEventBatches(
  js: JetStreamClient,
  jsm: JetStreamManager,
  stream: string,
  layout: Subjects,
  opts: ReadOptions = {},
): AsyncGenerator<LogRecord[]> {
  if (opts.via === "direct") {
    yield* readDirectBatches(jsm, stream, layout, opts);
    return;
  }
  const info = await whileElecting(() => leaderInfo(jsm, stream), `reading stream ${stream}`, opts.signal);
  const lastSeq = info.state.last_seq;
  const fromSeq = Math.max(1, opts.fromSeq ?? 1);
  const follow = opts.follow ?? false;
  const stopAt = readStop({ fromSeq, fromTimeMs: opts.fromTimeMs, untilSeq: opts.untilSeq, follow }, lastSeq);
  if (stopAt === undefined || opts.signal?.aborted) return;
  const read: ConsumerRead = {
    js,
    jsm,
    stream,
    layout,
    opts,
    follow,
    stopAt,
    endSeq: Math.min(stopAt, lastSeq),
    replicated: (info.config.num_replicas ?? 1) > 1,
  };
  let start: Start = opts.fromTimeMs !== undefined ? { timeMs: opts.fromTimeMs } : { seq: fromSeq };
  // What the stream held when the read began, read with a pass of its own
  // first (catch-up-pass.ts); the ordered consumer goes on from where it got to.
  if ("seq" in start && catchesUp(read, start.seq)) {
    const caught = yield* catchUpPass(read, start.seq);
    if (caught.outcome === "end") return;
    if (caught.lastDelivered > 0) start = { seq: caught.lastDelivered + 1 };
  }
  let fruitless = 0;
  let lastCause: LogError | undefined;
  for (;;) {
    const pass = yield* consumerPass(read, start);
    if (pass.outcome === "end") return;
    lastCause = pass.cause ?? lastCause;
    const lagging = afterLagging(fruitless, pass.lastDelivered, MAX_REOPENS);
    fruitless = lagging.fruitless;
    if (lagging.giveUp) {
      throw new LogError(
        "unavailable",
        `reading ${stream}: ${fruitless} readers in a row delivered nothing (placed on a replica still catching up, or gone quiet); reopen the read`,
        lastCause ? { cause: lastCause } : undefined,
      );
    }
    if (pass.lastDelivered > 0) start = { seq: pass.lastDelivered + 1 };
  }
}

/** What every consumer of one read shares. */
export interface ConsumerRead {
  js: JetStreamClient;
  jsm: JetStreamManager;
  stream: string;
  layout: Subjects;
  opts: ReadOptions;
  follow: boolean;
  /** The last sequence the read delivers (`readStop`). */
  stopAt: number;
  /** The last sequence a read that does not follow must reach (see EndCheck). */
  endSeq: number;
  replicated: boolean;
}

/** How one consumer's pass ended: the read is over, or its consumer lags and another is opened. */
interface PassEnd {
  outcome: "end" | "lagging";
  /** The last sequence it delivered (0: none). */
  lastDelivered: number;
  /** Why it was given up, when it went quiet. */
  cause?: LogError;
}

/**
 * One ordered consumer of the read, from `start`: yields its batches until
 * the read's end (`onDelivery`, `nothingLeft`), the caller's abort, or, for
 * a read that does not follow, the consumer lagging or going quiet.
 */
async function* consumerPass(read: ConsumerRead, start: Start): AsyncGenerator<LogRecord[], PassEnd> {
  const { opts, layout } = read;
  let lastDelivered = 0;
  const end = (outcome: PassEnd["outcome"], cause?: LogError): PassEnd =>
    cause ? { outcome, lastDelivered, cause } : { outcome, lastDelivered };
  const consumer = await openConsumer(read.js, read.stream, start, opts);
  // The signal may have fired during any of the awaits above. An abort
  // listener added after that never runs, and a following read would then
  // wait for new events forever: check again once the consumer exists.
  if (opts.signal?.aborted) return end("end");
  // Messages are handed over by callback as the client parses them, and
  // taken by the loop below a batch at a time.
  const inbox = new Inbox();
  const messages = await consumer.consume({
    max_messages: opts.batch ?? READ_BATCH,
    expires: READ_EXPIRES_MS,
    idle_heartbeat: IDLE_HEARTBEAT_MS,
    callback: (m) => inbox.put(m),
  });
  void messages.closed().then(
    (err) => inbox.close(err ?? undefined),
    (err: unknown) => inbox.close(err instanceof Error ? err : new Error(String(err))),
  );
  const onAbort = () => void messages.stop();
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  // A consumer hosted on a cluster member that died stays silent: the client
  // library asks for its info again and again, and a request to a dead host
  // times out rather than answering "not found", so it never recreates it.
  // The watchdog ends such a read with `unavailable`; a follower reopens a
  // fresh consumer (placed on a live member) after the last event it
  // handled, and a read that does not follow opens one itself (the caller).
  const watchdog = new ReadWatchdog(messages, read.stream);
  try {
    if (opts.signal?.aborted) return end("end");
    // A filtered read may never see a message at `stopAt` itself, and a
    // start-time read may start past it; `pending` tells when nothing
    // matching is left.
    const endCheck: EndCheck = {
      consumer,
      jsm: read.jsm,
      stream: read.stream,
      replicated: read.replicated,
      endSeq: read.endSeq,
      subjects: opts.subjects ?? [],
      ...(opts.signal ? { signal: opts.signal } : {}),
    };
    if (!read.follow) {
      const made = await consumerInfo(consumer);
      // Where the consumer starts counting: before its first sequence, or
      // (a start time) where its replica placed that time.
      const before = "seq" in start ? start.seq - 1 : (made?.delivered.stream_seq ?? 0);
      const left = await nothingLeft(endCheck, made?.num_pending ?? Number.POSITIVE_INFINITY, before);
      if (left !== "more") return end(left);
    }
    try {
      for (;;) {
        const arrived = await inbox.take();
        if (arrived === undefined || opts.signal?.aborted) return end("end");
        const batch = new RecordBatch();
        for (const m of arrived) {
          // Read once: each is a getter through the library's parsed delivery info.
          const seq = m.seq;
          const delivery = onDelivery(seq, read.stopAt, read.follow, m.info.pending);
          if (delivery !== "past-end") {
            lastDelivered = seq;
            const admitted = admit(layout, m, streamTimeMs(m), opts);
            if (admitted.kind === "record") batch.push(admitted.record);
            else if (admitted.kind !== "skip") {
              // In log order: what came before it is handed over first.
              const before = batch.take();
              if (before) yield before;
              tell(admitted, m, opts);
            }
            if (delivery === "next") continue;
          }
          const held = batch.take();
          if (held) yield held;
          if (delivery !== "check") return end("end");
          const left = await nothingLeft(endCheck, 0, seq);
          if (left !== "more") return end(left);
        }
        watchdog.alive();
        const held = batch.take();
        if (held) yield held;
      }
    } catch (err) {
      // A read that does not follow takes its consumer going quiet like
      // one placed on a replica still catching up (a restarted replica
      // may send no heartbeats while it catches up): another consumer
      // after what was delivered. A follower's caller reopens by itself.
      if (read.follow || err !== watchdog.error) throw err;
      return end("lagging", watchdog.error);
    }
  } finally {
    watchdog.stop();
    opts.signal?.removeEventListener("abort", onAbort);
    messages.stop();
  }
}

type Start = { seq: number } | { timeMs: number };

/**
 * The stream's time for a message in whole milliseconds, exactly
 * `m.timestampNanos / 1e6` rounded down, read from the digits of its reply
 * subject (the nanoseconds exceed 2^53, so the library's number is not
 * exact, and its BigInt splits the subject again for every message).
 */
export function streamTimeMs(m: JsMsg): number {
  const reply = (m as { reply?: unknown }).reply;
  if (typeof reply === "string") {
    const fields = ackReply(reply);
    if (fields !== undefined) return fields.timeMs;
  }
  return Number(m.timestampNanos / 1_000_000n);
}

/** An ordered consumer of `stream` from `start`, with the read's subject filter. */
function openConsumer(
  js: JetStreamClient,
  stream: string,
  start: Start,
  opts: ReadOptions,
): Promise<Consumer> {
  const from =
    "timeMs" in start
      ? { deliver_policy: DeliverPolicy.StartTime, opt_start_time: new Date(start.timeMs).toISOString() }
      : { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: start.seq };
  return whileElecting(
    () =>
      js.consumers.get(stream, {
        ...from,
        ...(opts.subjects && opts.subjects.length > 0 ? { filter_subjects: opts.subjects } : {}),
      }),
    `opening a reader on ${stream}`,
    opts.signal,
  );
}

/** Consumers in a row that delivered nothing (on a replica still catching up, or gone quiet) before the read fails. */
const MAX_REOPENS = 8;
