/**
 * The process's clock and timers, for the gateway's waits: its retry loop
 * is handed `PROCESS_CLOCK` (the simulation hands it the scheduler's).
 */
import { setTimeout as wait } from "node:timers/promises";
import type { RetryClock } from "./append-retry.js";

/** The process's monotonic clock and timers. */
export const PROCESS_CLOCK: RetryClock = { now: () => performance.now(), sleep };

/** Waits `ms`, or less when `signal` aborts; resolves either way. */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  // Node's timer promise rejects only when `signal` aborts, which here just ends the wait.
  await wait(ms, undefined, signal ? { signal } : {}).catch(() => undefined);
}

/** Waits for `p`, but no longer than `ms`; leaves no timer behind. */
export async function atMost(p: Promise<unknown>, ms: number): Promise<void> {
  const stop = new AbortController();
  try {
    await Promise.race([
      p.then(
        () => undefined,
        () => undefined,
      ),
      sleep(ms, stop.signal),
    ]);
  } finally {
    stop.abort();
  }
}
