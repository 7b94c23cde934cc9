import {
  type Consumer,
  type ConsumerInfo,
  DeliverPolicy,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from "@nats-io/jetstream";
import type { Event } from "../gen/llmgw/v1/events_pb.js";
import { admit, RecordBatch, tell } from "./admit.js";
import { readDirectBatches } from "./direct-read.js";
import { LogError } from "./errors.js";
import { afterLagging, endBeforeAsking, onDelivery, readStop } from "./read-end.js";
import { leaderInfo, whileElecting } from "./stream-leader.js";
import type { RefusedEvent } from "./subject-kinds.js";
import type { Subjects } from "./subjects.js";

/**
 * Each pull of a read lasts this long before the next; heartbeats come at
 * IDLE_HEARTBEAT_MS, which the server wants at most half of it.
 */
const READ_EXPIRES_MS = 5_000;
/**
 * Two missed in a row (4–6 s of silence) end a read as unavailable: long
 * enough that a busy process's event-loop lag is not taken for a dead member.
 */
const IDLE_HEARTBEAT_MS = 2_000;

const DEFAULT_BATCH = 10_000;

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
interface ConsumerRead {
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
    max_messages: opts.batch ?? DEFAULT_BATCH,
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
          const delivery = onDelivery(m.seq, read.stopAt, read.follow, m.info.pending);
          if (delivery !== "past-end") {
            lastDelivered = m.seq;
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
          const left = await nothingLeft(endCheck, 0, m.seq);
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
 * Messages handed over by the consumer's callback, taken a batch at a time.
 * `take` resolves with everything that arrived (waiting when nothing has),
 * or, once the consumer stopped and all was taken, with undefined, or
 * throws what it stopped with.
 */
class Inbox {
  #messages: JsMsg[] = [];
  #wake: (() => void) | undefined;
  #closed = false;
  #error: Error | undefined;

  put(m: JsMsg): void {
    this.#messages.push(m);
    this.#wakeUp();
  }

  close(err: Error | undefined): void {
    this.#closed = true;
    this.#error = err;
    this.#wakeUp();
  }

  async take(): Promise<JsMsg[] | undefined> {
    while (this.#messages.length === 0) {
      if (this.#closed) {
        if (this.#error) throw this.#error;
        return undefined;
      }
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
    }
    const taken = this.#messages;
    this.#messages = [];
    return taken;
  }

  #wakeUp(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}

/**
 * The stream's time for a message in whole milliseconds, exactly
 * `m.timestampNanos / 1e6` rounded down, read from the digits of its reply
 * subject (the nanoseconds exceed 2^53, so the library's number is not
 * exact, and its BigInt splits the subject again for every message).
 */
export function streamTimeMs(m: JsMsg): number {
  const reply = (m as { reply?: unknown }).reply;
  if (typeof reply === "string") {
    const nanos = nanosToken(reply);
    if (nanos !== undefined) return nanos.length > 6 ? Number(nanos.slice(0, -6)) : 0;
  }
  return Number(m.timestampNanos / 1_000_000n);
}

/**
 * The nanoseconds of a JetStream reply subject, as the library finds them:
 * `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<nanos>.<pending>`
 * (9 tokens) or, with a domain and account hash after `$JS.ACK`, the 10th
 * token of 11 or more. Undefined for anything else (left to the library).
 */
function nanosToken(reply: string): string | undefined {
  if (!reply.startsWith("$JS.ACK.")) return undefined;
  const dots: number[] = [];
  for (let i = reply.indexOf("."); i !== -1; i = reply.indexOf(".", i + 1)) dots.push(i);
  const tokens = dots.length + 1;
  const at = tokens === 9 ? 7 : tokens >= 11 ? 9 : -1;
  if (at < 0) return undefined;
  const token = reply.slice((dots[at - 1] as number) + 1, dots[at]);
  return /^[0-9]+$/.test(token) ? token : undefined;
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

/**
 * Ends a read with an `unavailable` LogError when its consumer went quiet:
 * two missed heartbeats, or no message and no new pull for two pull periods
 * (the library's own recovery can loop silently on requests to a dead host).
 */
class ReadWatchdog {
  #last = Date.now();
  readonly #timer: NodeJS.Timeout;
  #done = false;
  #error: LogError | undefined;

  constructor(
    private readonly messages: { status(): AsyncIterable<{ type: string }>; stop(err?: Error): void },
    private readonly stream: string,
  ) {
    this.#timer = setInterval(() => {
      const quiet = Date.now() - this.#last;
      if (quiet > 2 * READ_EXPIRES_MS + 4_000) this.#fail(`no message and no pull for ${quiet} ms`);
    }, 1_000);
    this.#timer.unref();
    void this.#watch();
  }

  /** The error this ended the read with (the consumer went quiet), if it did. */
  get error(): LogError | undefined {
    return this.#error;
  }

  alive(): void {
    this.#last = Date.now();
  }

  stop(): void {
    this.#done = true;
    clearInterval(this.#timer);
  }

  async #watch(): Promise<void> {
    try {
      for await (const s of this.messages.status()) {
        if (this.#done) return;
        if (s.type === "next" || s.type === "ordered_consumer_recreated") this.alive();
        else if (s.type === "heartbeats_missed") return this.#fail("the server stopped sending heartbeats");
      }
    } catch {
      // The read ended first.
    }
  }

  #fail(why: string): void {
    if (this.#done) return;
    this.#error = new LogError(
      "unavailable",
      `reading ${this.stream}: ${why} (a cluster member down?); reopen the read`,
    );
    this.stop();
    this.messages.stop(this.#error);
  }
}

async function consumerInfo(consumer: { info(cached?: boolean): Promise<ConsumerInfo> }) {
  try {
    return await consumer.info(true);
  } catch {
    return undefined;
  }
}

/** A replica catching up is waited for this long before the read's consumer is given up for a new one. */
const CATCH_UP_WAIT_MS = 1_500;
/** Consumers in a row that delivered nothing (on a replica still catching up, or gone quiet) before the read fails. */
const MAX_REOPENS = 8;

interface EndCheck {
  consumer: { info(cached?: boolean): Promise<ConsumerInfo> };
  jsm: JetStreamManager;
  stream: string;
  /** More than one copy of the stream: a consumer's count may come from one still catching up. */
  replicated: boolean;
  /**
   * The last sequence the read must reach: its own last, or the stream's
   * last when it began if that is earlier (what is appended during a read
   * may be left to the next).
   */
  endSeq: number;
  /** The read's subject filter; empty: every subject. */
  subjects: readonly string[];
  signal?: AbortSignal;
}

/**
 * Whether a read that is not following has nothing left ("end"), more to
 * come ("more"), or sits on a replica that has not got the rest yet
 * ("lagging").
 *
 * `pending` is the count the read already has (a message's, or the
 * consumer's when it was made) and `after` the sequence it counts from. With
 * one copy of the stream that count is the answer, and nothing more is asked.
 *
 * A reader's consumer (ephemeral, one replica) may be placed on any replica
 * of the stream, including one that restarted and is still catching up. Its
 * pending count then ends where that replica's copy ends, and trusting it
 * would end the read early: after a stream-leader failover, acknowledged
 * events stored all along would read as missing. Nor is the leader's
 * "current" for that replica enough: it speaks of the replica's raft log,
 * which can be ahead of its copy of the stream. So the answer
 * comes from the stream leader, by sequence: none stored after `after` up to
 * the read's end is a certain "end". Otherwise the replica has it to come:
 * this waits CATCH_UP_WAIT_MS for its count to rise, then says "lagging" and
 * the read opens another consumer (a restarted replica may stay behind for
 * many seconds when nothing is written).
 */
async function nothingLeft(c: EndCheck, pending: number, after: number): Promise<"end" | "more" | "lagging"> {
  const first = endBeforeAsking(pending, after, c.endSeq, c.replicated);
  if (first !== "ask-leader") return first;
  let more: boolean;
  try {
    more = await storedBetween(c, after);
  } catch (err) {
    if (c.signal?.aborted) return "end";
    throw err;
  }
  if (!more) return "end";
  const deadline = performance.now() + CATCH_UP_WAIT_MS;
  for (;;) {
    if (c.signal?.aborted) return "end";
    await new Promise((r) => setTimeout(r, 100));
    let hostPending: number;
    try {
      hostPending = (await c.consumer.info(false)).num_pending;
    } catch {
      return "lagging";
    }
    if (hostPending > 0) return "more";
    if (performance.now() > deadline) return "lagging";
  }
}

/** Whether the stream leader has a message the read wants after `after`, up to the read's end. */
async function storedBetween(c: EndCheck, after: number): Promise<boolean> {
  if (c.subjects.length === 0) {
    // Unfiltered: the read's end is a message the leader had when the read
    // began, and this log loses messages only from the front (its age
    // limit), so the rest is there unless that limit took it since.
    const info = await whileElecting(
      () => leaderInfo(c.jsm, c.stream),
      `reading stream ${c.stream}`,
      c.signal,
    );
    return info.state.first_seq <= c.endSeq;
  }
  // Filtered: the first match after `after` per subject. A message get is
  // answered by the stream leader only (a group without one answers
  // "unavailable", waited out).
  const seqs = await Promise.all(
    c.subjects.map(async (subject) => {
      // The client's types leave out `next_by_subj` for this request; the server takes it.
      const query = { seq: after + 1, next_by_subj: subject } as unknown as Parameters<
        JetStreamManager["streams"]["getMessage"]
      >[1];
      const m = await whileElecting(
        () => c.jsm.streams.getMessage(c.stream, query),
        `reading stream ${c.stream}`,
        c.signal,
      );
      return m?.seq;
    }),
  );
  return seqs.some((s) => s !== undefined && s <= c.endSeq);
}
