/**
 * Whether a read that does not follow has nothing left, asked of the
 * stream leader when one copy of the stream cannot be trusted to say
 * (`nothingLeft`); the decisions that need no server are read-end.ts's.
 * Used by reader.ts.
 */
import type { ConsumerInfo, JetStreamManager } from "@nats-io/jetstream";
import { endBeforeAsking } from "./read-end.js";
import { leaderInfo, whileElecting } from "./stream-leader.js";

/** The consumer's info as it was made (cached), or undefined when it cannot be had. */
export async function consumerInfo(consumer: { info(cached?: boolean): Promise<ConsumerInfo> }) {
  try {
    return await consumer.info(true);
  } catch {
    return undefined;
  }
}

/** A replica catching up is waited for this long before the read's consumer is given up for a new one. */
const CATCH_UP_WAIT_MS = 1_500;

export interface EndCheck {
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
export async function nothingLeft(
  c: EndCheck,
  pending: number,
  after: number,
): Promise<"end" | "more" | "lagging"> {
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
