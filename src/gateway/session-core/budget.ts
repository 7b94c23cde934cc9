/**
 * The per-session event budget: a token bucket, `burst` events deep,
 * refilled at `perMinute` events a minute. Every event a session writes
 * after its session-opened event costs one token; a step whose events the
 * bucket cannot pay for closes the session (EVENT_BUDGET, ResourceExhausted)
 * and writes none of them. Time is an input (milliseconds of the shell's
 * monotonic clock): the core reads no clock.
 */
export interface EventBudget {
  readonly perMinute: number;
  readonly burst: number;
}

export interface Bucket {
  /** Events the session may still write at once. */
  readonly tokens: number;
  /** When `tokens` was computed. */
  readonly at: number;
}

const MINUTE_MS = 60_000;

/** A session opens with a full bucket. */
export function fullBucket(budget: EventBudget, at: number): Bucket {
  return { tokens: budget.burst, at };
}

/**
 * The bucket after writing `events` events at time `at`, or undefined when
 * it cannot pay for them. A time before the bucket's (a flush timer's due
 * time, which can lag the last message's arrival) refills nothing.
 */
export function spend(bucket: Bucket, budget: EventBudget, events: number, at: number): Bucket | undefined {
  const now = Math.max(at, bucket.at);
  const refilled = Math.min(budget.burst, bucket.tokens + ((now - bucket.at) * budget.perMinute) / MINUTE_MS);
  if (refilled < events) return undefined;
  return { tokens: refilled - events, at: now };
}

/** The close detail of a session over its budget. */
export function overBudgetDetail(budget: EventBudget): string {
  return `the session writes events faster than its budget of ${budget.perMinute} a minute (burst ${budget.burst}); reconnect and report less often`;
}
