/**
 * Reading the log without a consumer: batched direct gets
 * (`$JS.API.DIRECT.GET.<stream>` with `{"seq": N, "batch": B}`, nats-server
 * 2.11 or later, on a stream with `allow_direct`). The reader and router
 * roles read this way because they may create no consumer at all: NATS
 * cannot tell a push consumer's create from a pull consumer's by subject
 * (nats-server issue #8274), and a push consumer is a write through the
 * server (docs/SECURITY.md, "Consumers").
 *
 * Each message goes through the same start time, decode and subject ↔ kind
 * refusal as the consumer reader's (`admit`, admit.ts), and is yielded as
 * the same `LogRecord`. A following read asks again every `pollMs` once it
 * has reached the end (a direct get does not wait for new messages): that
 * bounds how late it sees an event, at one small request per interval.
 */
import type { JetStreamManager, StoredMsg } from "@nats-io/jetstream";
import { admit, RecordBatch, tell } from "./admit.js";
import { LogError, logErrorFrom } from "./errors.js";
import { readStop } from "./read-end.js";
import type { LogRecord, ReadOptions } from "./reader.js";
import { leaderInfo, whileElecting } from "./stream-leader.js";
import type { Subjects } from "./subjects.js";

/** How long a following direct read waits at the end before asking again (ms). */
export const DIRECT_POLL_MS = 50;
/** Messages one direct get asks for. */
const DIRECT_BATCH = 1024;
/** Asks of the stream leader in a row, 100 ms apart, while a replica that answers gets is behind it. */
const CATCH_UP_ASKS = 50;

export interface DirectReadOptions extends ReadOptions {
  /** A following read asks for new messages this often once at the end (default DIRECT_POLL_MS). */
  pollMs?: number;
}

/**
 * `readEventBatches` with direct gets instead of a consumer: the same
 * records, refusals and malformed handling, in log order. A direct get
 * filters by one subject (wildcards allowed); with several, one get per
 * subject is merged by sequence (see `directBatches`).
 */
export async function* readDirectBatches(
  jsm: JetStreamManager,
  stream: string,
  layout: Subjects,
  opts: DirectReadOptions = {},
): AsyncGenerator<LogRecord[]> {
  const filters: Array<string | undefined> =
    opts.subjects && opts.subjects.length > 0 ? opts.subjects : [undefined];
  const info = await whileElecting(() => leaderInfo(jsm, stream), `reading stream ${stream}`, opts.signal);
  if (info.config.allow_direct !== true) {
    throw new LogError(
      "incompatible-stream",
      `stream ${stream} does not allow direct gets, which readers without consumers need; ` +
        "`llmgw api` (whose credentials may update the stream) turns them on, or `nats stream edit " +
        `${stream} --allow-direct\``,
    );
  }
  const lastSeq = info.state.last_seq;
  const fromSeq = Math.max(1, opts.fromSeq ?? 1);
  const follow = opts.follow ?? false;
  const stopAt = readStop({ fromSeq, fromTimeMs: opts.fromTimeMs, untilSeq: opts.untilSeq, follow }, lastSeq);
  if (stopAt === undefined || opts.signal?.aborted) return;
  const endSeq = Math.min(stopAt, lastSeq);
  const replicated = (info.config.num_replicas ?? 1) > 1;
  const pollMs = opts.pollMs ?? DIRECT_POLL_MS;

  // The next sequence to ask for; a start time places the first ask only.
  let cursor = fromSeq;
  let startTime = opts.fromTimeMs;
  let behind = 0;
  for (;;) {
    if (opts.signal?.aborted) return;
    const from = startTime !== undefined ? { start_time: new Date(startTime) } : { seq: cursor };
    const batch = opts.batch !== undefined ? Math.max(1, Math.min(opts.batch, DIRECT_BATCH)) : DIRECT_BATCH;
    const { messages: got, more } = await whileElecting(
      () => directBatches(jsm, stream, from, batch, filters),
      `reading stream ${stream}`,
      opts.signal,
    );
    // Nothing stored at or after the start time: what the stream held when
    // the read began is all older, so the read goes on after it.
    if (startTime !== undefined && got.length === 0) cursor = Math.max(cursor, lastSeq + 1);
    startTime = undefined;
    const out = new RecordBatch();
    let done = false;
    for (const m of got) {
      if (m.seq > stopAt) {
        done = true;
        break;
      }
      cursor = m.seq + 1;
      const admitted = admit(layout, m, m.time.getTime(), opts);
      if (admitted.kind === "record") out.push(admitted.record);
      else if (admitted.kind !== "skip") {
        // In log order: what came before it is handed over first.
        const before = out.take();
        if (before) yield before;
        tell(admitted, m, opts);
      }
      if (m.seq >= stopAt) {
        done = true;
        break;
      }
    }
    const held = out.take();
    if (held) yield held;
    if (done) return;
    if (more) continue;
    // At the end of what the answering copy holds.
    if (follow) {
      await pause(pollMs, opts.signal);
      continue;
    }
    if (cursor > endSeq) return;
    // One copy: its end is the stream's. Several: the copy that answered may
    // be behind the leader, which tells by sequence whether more is stored.
    if (!replicated) return;
    const stored = await Promise.all(
      filters.map((f) => storedAfter(jsm, stream, cursor - 1, endSeq, f, opts.signal)),
    );
    if (!stored.some(Boolean)) return;
    if (++behind > CATCH_UP_ASKS) {
      throw new LogError(
        "unavailable",
        `reading ${stream}: the copy answering direct gets stays behind the stream leader after sequence ${cursor - 1}; reopen the read`,
      );
    }
    await pause(100, opts.signal);
  }
}

type DirectQuery = Parameters<JetStreamManager["direct"]["getBatch"]>[1];

/**
 * One batched direct get per filter (`undefined`: every subject), merged in
 * sequence order without duplicates (filters may overlap). A filter whose
 * batch came back with more after it may have messages before other
 * filters' later ones: the merge stops at its last, and `more` says to ask
 * again after that.
 */
async function directBatches(
  jsm: JetStreamManager,
  stream: string,
  from: { seq: number } | { start_time: Date },
  batch: number,
  filters: Array<string | undefined>,
): Promise<{ messages: StoredMsg[]; more: boolean }> {
  const answers = await Promise.all(
    filters.map((f) =>
      directBatch(jsm, stream, {
        ...from,
        batch,
        ...(f !== undefined ? { next_by_subj: f } : {}),
      } as DirectQuery),
    ),
  );
  let limit = Number.POSITIVE_INFINITY;
  for (const got of answers) {
    const last = got[got.length - 1];
    if (last !== undefined && last.pending > 0) limit = Math.min(limit, last.seq);
  }
  const more = limit !== Number.POSITIVE_INFINITY;
  if (answers.length === 1) return { messages: answers[0] ?? [], more };
  const bySeq = new Map<number, StoredMsg>();
  for (const got of answers) for (const m of got) if (m.seq <= limit) bySeq.set(m.seq, m);
  return { messages: [...bySeq.values()].sort((a, b) => a.seq - b.seq), more };
}

/** One batched direct get, read whole (a batch is at most DIRECT_BATCH messages). */
async function directBatch(jsm: JetStreamManager, stream: string, query: DirectQuery): Promise<StoredMsg[]> {
  const out: StoredMsg[] = [];
  try {
    for await (const m of await jsm.direct.getBatch(stream, { ...query })) out.push(m);
  } catch (err) {
    const e = logErrorFrom(err, `reading stream ${stream}`);
    // Nothing at or after the sequence asked for.
    if (e.code === "not-found") return out;
    throw e;
  }
  return out;
}

/** Whether the stream leader stores a message after `after`, up to `endSeq` (matching `filter`). */
async function storedAfter(
  jsm: JetStreamManager,
  stream: string,
  after: number,
  endSeq: number,
  filter: string | undefined,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  // A message get is answered by the stream leader only.
  const query = (
    filter !== undefined ? { seq: after + 1, next_by_subj: filter } : { seq: after + 1 }
  ) as Parameters<JetStreamManager["streams"]["getMessage"]>[1];
  const m = await whileElecting(
    async () => {
      try {
        return await jsm.streams.getMessage(stream, query);
      } catch (err) {
        const e = logErrorFrom(err);
        if (e.code === "not-found") return null;
        throw e;
      }
    },
    `reading stream ${stream}`,
    signal,
  );
  return m !== null && m.seq <= endSeq;
}

/** Waits `ms`, or less when `signal` aborts. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
