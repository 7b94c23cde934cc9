import type { Event } from "../gen/llmgw/v1/events_pb.js";
import type { Appended } from "../log/append.js";
import { isLogError, LogError } from "../log/log-error.js";

/**
 * What the retry loop reads time from and waits with: the process's clock
 * and timers in the gateway, the scheduler's in the simulation
 * (src/simulation), which runs this same loop.
 */
export interface RetryClock {
  /** Milliseconds, from any origin. */
  now(): number;
  /** Waits `ms`, or less when `signal` aborts; resolves either way. */
  sleep(ms: number, signal: AbortSignal | undefined): Promise<void>;
}

export interface AppendRetryOptions {
  clock: RetryClock;
  /** Ack timeout of one attempt. */
  timeoutMs: number;
  /** Give up (with an `unavailable` LogError) once the log has not taken the event for this long. */
  limitMs: number;
  signal?: AbortSignal | undefined;
  /** Told before each wait for a retry (the gateway counts and logs them). */
  onRetry?: (attempt: number, err: LogError) => void;
}

/** The first wait before a retry; each next one doubles, up to RETRY_MAX_DELAY_MS. */
const RETRY_FIRST_DELAY_MS = 50;
const RETRY_MAX_DELAY_MS = 1_000;
/** No attempt waits for its ack less than this, however close the limit. */
const MIN_ATTEMPT_TIMEOUT_MS = 100;

/**
 * The gateway's policy for an event the log did not take: `attempt` is
 * called again (the same event, so the same message id: a publish whose ack
 * was lost is stored once) while it fails with an `unavailable` LogError,
 * after 50 ms, then twice as long each time up to 1 s, until `limitMs` has
 * passed or `signal` aborted. Other errors are not retried.
 */
export async function appendRetrying(
  event: Event,
  attempt: (timeoutMs: number) => Promise<Appended>,
  o: AppendRetryOptions,
): Promise<Appended> {
  const started = o.clock.now();
  const giveUpAt = started + o.limitMs;
  let delay = RETRY_FIRST_DELAY_MS;
  for (let n = 1; ; n++) {
    try {
      return await attempt(Math.max(MIN_ATTEMPT_TIMEOUT_MS, Math.min(o.timeoutMs, giveUpAt - o.clock.now())));
    } catch (err) {
      if (!isLogError(err, "unavailable")) throw err;
      if (o.signal?.aborted) throw err;
      const now = o.clock.now();
      if (now + delay >= giveUpAt) {
        throw new LogError(
          "unavailable",
          `the log did not take event ${event.id} within ${Math.round(now - started)} ms (${n} attempts): ${err.message}`,
          { cause: err },
        );
      }
      o.onRetry?.(n, err);
      await o.clock.sleep(delay, o.signal);
      delay = Math.min(delay * 2, RETRY_MAX_DELAY_MS);
    }
  }
}
