/**
 * The scheduler as the gateway's retry loop sees a clock (`RetryClock`):
 * its time, and waits that are its timers, cut short when their signal
 * aborts.
 */
import type { RetryClock } from "../gateway/append-retry.js";
import type { Scheduler } from "./scheduler.js";

export function schedulerClock(scheduler: Scheduler): RetryClock {
  return {
    now: () => scheduler.now,
    sleep: (ms, signal) =>
      new Promise<void>((resolve) => {
        if (signal?.aborted) {
          resolve();
          return;
        }
        const onAbort = () => {
          scheduler.cancel(timer);
          resolve();
        };
        const timer = scheduler.after(ms, () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        });
        signal?.addEventListener("abort", onAbort, { once: true });
      }),
  };
}
