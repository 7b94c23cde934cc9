import type { Logger } from "pino";
import type { Log, LogRecord } from "../log/index.js";
import { sleep } from "./process-clock.js";

/**
 * Follows `subjects` of the log from `fromSeq` until `signal` aborts,
 * handing each event to `onRecord` in order. A read that fails (NATS
 * restarting, a consumer lost) is reopened after the last event handled, so
 * nothing is skipped or handled twice.
 */
export async function follow(
  log: Log,
  opts: {
    subjects: string[];
    fromSeq: number;
    signal: AbortSignal;
    logger: Logger;
    onRecord: (r: LogRecord) => void;
    /** Called after each (re)open of the read: the follower is live from `fromSeq`. */
    onOpen?: () => void;
  },
): Promise<void> {
  let next = opts.fromSeq;
  let delay = 100;
  while (!opts.signal.aborted) {
    try {
      opts.onOpen?.();
      for await (const r of log.read({
        fromSeq: next,
        follow: true,
        subjects: opts.subjects,
        signal: opts.signal,
        onMalformed: (err) => opts.logger.warn({ err: err.message, seq: err.seq }, "malformed event skipped"),
        onRefused: (r) => {
          next = r.seq + 1;
          opts.logger.warn(
            { seq: r.seq, subject: r.subject, kind: r.kind },
            `refused ${r.kind} at sequence ${r.seq} on ${r.subject}, not relayed: ${r.reason}`,
          );
        },
      })) {
        next = r.seq + 1;
        delay = 100;
        opts.onRecord(r);
      }
    } catch (err) {
      if (opts.signal.aborted) return;
      opts.logger.warn(
        { err: (err as Error).message, subjects: opts.subjects, next },
        "log read failed; reopening",
      );
    }
    await sleep(delay, opts.signal);
    delay = Math.min(delay * 2, 2_000);
  }
}
