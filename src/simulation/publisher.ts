/**
 * A simulated gateway's way into the in-memory log, as the gateway's
 * `Publisher` is its way into JetStream: one bounded window of publishes
 * (the log's own `AppendWindow`) over the log's real append path, and
 * retries through the gateway's own loop (`appendRetrying`: the same
 * message id, the same delays and limit), on the scheduler's clock. The
 * sessions' `OrderedPipeline`s run over it unchanged. The in-memory log
 * never drops a connection, so the epoch stays 0.
 */
import { appendRetrying, type RetryClock } from "../gateway/append-retry.js";
import type { AttemptHandler, PipelinePublisher } from "../gateway/ordered.js";
import type { PublisherOptions } from "../gateway/publisher.js";
import type { Event } from "../gen/llmgw/v1/events_pb.js";
import type { Appended, AppendHandler, LogAppender } from "../log/append.js";
import { LogError } from "../log/log-error.js";
import { AppendWindow } from "../log/window.js";
import type { Scheduler } from "./scheduler.js";

export class SimPublisher implements PipelinePublisher {
  readonly epoch = 0;
  readonly connected = true;
  readonly #window: AppendWindow;
  readonly #clock: RetryClock;
  /** The process died: nothing more is sent. */
  #dead = false;

  constructor(
    appender: LogAppender,
    scheduler: Scheduler,
    private readonly opts: PublisherOptions,
  ) {
    this.#window = new AppendWindow(appender, opts.window);
    this.#clock = {
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

  /** The gateway's process died: publishes already sent may still be stored, no new one is sent. */
  kill(): void {
    this.#dead = true;
  }

  tryAttempt(event: Event, handler: AttemptHandler): boolean {
    if (this.#dead) return false;
    return this.#window.tryStartWith(event, { timeoutMs: this.opts.timeoutMs }, new Attempt(handler));
  }

  whenSlot(taken: () => boolean): void {
    if (!this.#dead) this.#window.whenFree(taken);
  }

  append(event: Event, opts: { signal?: AbortSignal; limitMs?: number } = {}): Promise<Appended> {
    return appendRetrying(event, this.#attempt(event), {
      clock: this.#clock,
      timeoutMs: this.opts.timeoutMs,
      limitMs: opts.limitMs ?? this.opts.unavailableLimitMs,
      signal: opts.signal,
    });
  }

  #attempt(event: Event): (timeoutMs: number) => Promise<Appended> {
    return (timeoutMs) =>
      this.#dead
        ? Promise.reject(new LogError("internal", `the gateway process is gone; ${event.id} was not sent`))
        : this.#window.append(event, { timeoutMs });
  }
}

/** An attempt's end, told to the pipeline's entry. */
class Attempt implements AppendHandler {
  constructor(private readonly handler: AttemptHandler) {}

  appended(a: Appended): void {
    this.handler.stored(a);
  }

  failed(err: LogError): void {
    this.handler.failed(err);
  }
}
