import { DeliverPolicy, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import type { Event } from "../gen/llmgw/v1/events_pb.js";
import { decodeEvent } from "./codec.js";
import { LogError } from "./errors.js";

/** Tries to open the ordered consumer (about 15 s of backoff in all) before giving up. */
const OPEN_ATTEMPTS = 10;

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
  /** Stops a following read. */
  signal?: AbortSignal;
  /** Messages fetched per pull; default 512. */
  batch?: number;
}

/**
 * Reads the log in order with an ordered consumer and yields decoded events
 * with their sequence and time.
 */
export async function* readEvents(
  js: JetStreamClient,
  jsm: JetStreamManager,
  stream: string,
  opts: ReadOptions = {},
): AsyncGenerator<LogRecord> {
  const lastSeq = await whileElecting(
    async () => (await jsm.streams.info(stream)).state.last_seq,
    `reading stream ${stream}`,
    opts.signal,
  );
  const fromSeq = Math.max(1, opts.fromSeq ?? 1);
  const stopAt = opts.untilSeq ?? (opts.follow ? Number.POSITIVE_INFINITY : lastSeq);
  if (opts.fromTimeMs === undefined && fromSeq > stopAt) return;
  if (!opts.follow && lastSeq === 0) return;
  if (opts.signal?.aborted) return;

  const consumerOpts =
    opts.fromTimeMs !== undefined
      ? { deliver_policy: DeliverPolicy.StartTime, opt_start_time: new Date(opts.fromTimeMs).toISOString() }
      : { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: fromSeq };
  const consumer = await whileElecting(
    () =>
      js.consumers.get(stream, {
        ...consumerOpts,
        ...(opts.subjects && opts.subjects.length > 0 ? { filter_subjects: opts.subjects } : {}),
      }),
    `opening a reader on ${stream}`,
    opts.signal,
  );

  // The signal may have fired during any of the awaits above. An abort
  // listener added after that never runs, and a following read would then
  // wait for new events forever: check again once the consumer exists.
  if (opts.signal?.aborted) return;
  const messages = await consumer.consume({ max_messages: opts.batch ?? 512 });
  const onAbort = () => void messages.stop();
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  try {
    if (opts.signal?.aborted) return;
    // A filtered read may never see a message at `stopAt` itself, and a
    // start-time read may start past it; `pending` tells when nothing
    // matching is left.
    if (!opts.follow && (await consumerPending(consumer)) === 0) return;
    for await (const m of messages) {
      if (m.seq > stopAt) break;
      let event: Event | undefined;
      try {
        event = decodeEvent(m.data, m.seq);
      } catch (err) {
        const e = LogError.from(err);
        if (!opts.onMalformed) throw e;
        opts.onMalformed(e, { seq: m.seq, subject: m.subject, data: m.data });
      }
      if (event) {
        yield { seq: m.seq, timeMs: Number(m.timestampNanos / 1_000_000n), subject: m.subject, event };
      }
      if (m.seq >= stopAt) break;
      if (!opts.follow && m.info.pending === 0) break;
    }
  } finally {
    opts.signal?.removeEventListener("abort", onAbort);
    messages.stop();
  }
}

async function consumerPending(consumer: { info(cached?: boolean): Promise<{ num_pending: number }> }) {
  try {
    return (await consumer.info(true)).num_pending;
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

/**
 * Runs `fn`, retrying while the log is unavailable for a while (about 15 s of
 * backoff in all). While a cluster elects a new stream leader after a server
 * died, stream info and consumer creation time out; that is worth waiting
 * out rather than failing a replay or a follower.
 */
async function whileElecting<T>(fn: () => Promise<T>, what: string, signal?: AbortSignal): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const e = LogError.from(err, what);
      if (e.code !== "unavailable" || attempt >= OPEN_ATTEMPTS || signal?.aborted) throw e;
      await new Promise((r) => setTimeout(r, Math.min(2000, 100 * 2 ** attempt)));
    }
  }
}
