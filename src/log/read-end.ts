/**
 * When a read of the log has reached its end: the decisions of `readEvents`
 * that need no server, apart from the generator that asks the server
 * (docs/ARCHITECTURE.md, "The log"). Pure: sequences and counts in, a
 * decision out.
 */

/** What a read asks for, as far as its end is concerned. */
export interface ReadRange {
  /** First sequence to read (at least 1). */
  fromSeq: number;
  /** Start at a time instead of `fromSeq`. */
  fromTimeMs: number | undefined;
  /** Last sequence to read, if the caller named one. */
  untilSeq: number | undefined;
  follow: boolean;
}

/**
 * The last sequence a read delivers: the one asked for, or without one the
 * stream's last when the read began (a follower: none). Undefined when the
 * read has nothing to read at all.
 */
export function readStop(r: ReadRange, lastSeq: number): number | undefined {
  const stopAt = r.untilSeq ?? (r.follow ? Number.POSITIVE_INFINITY : lastSeq);
  if (r.fromTimeMs === undefined && r.fromSeq > stopAt) return undefined;
  if (!r.follow && lastSeq === 0) return undefined;
  return stopAt;
}

/**
 * What the read does with a delivered message: `past-end` (dropped, the
 * read is over), `last` (yielded, the read is over), `check` (yielded; the
 * consumer counts nothing pending, so ask whether anything is left) or
 * `next`.
 */
export type Delivery = "past-end" | "last" | "check" | "next";

export function onDelivery(seq: number, stopAt: number, follow: boolean, pending: number): Delivery {
  if (seq > stopAt) return "past-end";
  if (seq >= stopAt) return "last";
  if (!follow && pending === 0) return "check";
  return "next";
}

/**
 * Whether a read that is not following has nothing left ("end"), more to
 * come ("more"), or must ask the stream leader ("ask-leader"): `pending` is
 * the count the read's consumer has, `after` the sequence it counts from.
 * With one copy of the stream the consumer's count is the answer; with
 * several it may come from a replica still catching up, so a zero below the
 * read's end is not trusted (see `nothingLeft` in end-check.ts).
 */
export function endBeforeAsking(
  pending: number,
  after: number,
  endSeq: number,
  replicated: boolean,
): "end" | "more" | "ask-leader" {
  if (pending > 0) return "more";
  if (!replicated || after >= endSeq) return "end";
  return "ask-leader";
}

/**
 * After a consumer was given up as lagging: how many consumers in a row
 * delivered nothing, and whether the read gives up (more than `maxReopens`
 * of them) rather than opening another.
 */
export function afterLagging(
  fruitless: number,
  lastDelivered: number,
  maxReopens: number,
): { fruitless: number; giveUp: boolean } {
  const next = lastDelivered > 0 ? 0 : fruitless + 1;
  return { fruitless: next, giveUp: next > maxReopens };
}
