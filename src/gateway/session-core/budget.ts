/**
 * The per-session budgets: token buckets, `burst` deep, refilled at
 * `perMinute` a minute. Every event a session writes after its
 * session-opened event costs one token of the event budget and its size
 * (event-bytes.ts) of the byte budget; a step whose events either bucket
 * cannot pay for closes the session (EVENT_BUDGET, ResourceExhausted) and
 * writes none of them. The same bucket bounds how often a node may register
 * (reconnect-rate.ts). Time is an input (milliseconds of the shell's
 * monotonic clock): the core reads no clock.
 */
export interface RateBudget {
  readonly perMinute: number;
  readonly burst: number;
}

/** Events a session may write. */
export type EventBudget = RateBudget;
/** Bytes a session may write. */
export type ByteBudget = RateBudget;

export interface Bucket {
  /** Events the session may still write at once. */
  readonly tokens: number;
  /** When `tokens` was computed. */
  readonly at: number;
}

const MINUTE_MS = 60_000;

/** A session opens with a full bucket. */
export function fullBucket(budget: RateBudget, at: number): Bucket {
  return { tokens: budget.burst, at };
}

/**
 * The bucket after writing `events` events at time `at`, or undefined when
 * it cannot pay for them. A time before the bucket's (a flush timer's due
 * time, which can lag the last message's arrival) refills nothing.
 */
export function spend(bucket: Bucket, budget: RateBudget, events: number, at: number): Bucket | undefined {
  const now = Math.max(at, bucket.at);
  const refilled = refill(bucket, budget, now);
  if (refilled < events) return undefined;
  return { tokens: refilled - events, at: now };
}

/** The tokens of `bucket` at `now` (not before its own time). */
export function refill(bucket: Bucket, budget: RateBudget, now: number): number {
  return Math.min(
    budget.burst,
    bucket.tokens + (Math.max(0, now - bucket.at) * budget.perMinute) / MINUTE_MS,
  );
}

/** How long until `bucket` holds `tokens` (0: it does now). */
export function waitFor(bucket: Bucket, budget: RateBudget, tokens: number, now: number): number {
  const missing = tokens - refill(bucket, budget, now);
  return missing <= 0 ? 0 : Math.ceil((missing * MINUTE_MS) / budget.perMinute);
}

/** The close detail of a session over its byte budget. */
export function overByteBudgetDetail(budget: ByteBudget): string {
  return `the session writes more bytes than its budget of ${budget.perMinute} a minute (burst ${budget.burst}); reconnect and report less (shorter outputs and errors)`;
}

/** The close detail of a session over its budget. */
export function overBudgetDetail(budget: EventBudget): string {
  return `the session writes events faster than its budget of ${budget.perMinute} a minute (burst ${budget.burst}); reconnect and report less often`;
}
