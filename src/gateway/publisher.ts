import type { Logger } from "pino";
import type { Event } from "../gen/llmgw/v1/events_pb.js";
import type { Appended, AppendHandler, LogAppender } from "../log/append.js";
import type { LogError } from "../log/log-error.js";
import { AppendWindow } from "../log/window.js";
import { appendRetrying, type RetryClock } from "./append-retry.js";
import type { GatewayMetrics } from "./metrics.js";
import type { AttemptHandler, PipelinePublisher } from "./ordered.js";

/** What a publisher publishes over: one connection's appends, and its status changes. */
export interface PublisherConnection {
  appender: LogAppender;
  /** Disconnects and reconnects (a NATS connection's `status()`); none for one that never drops. */
  statuses?: AsyncIterable<{ type: string }>;
}

/** What a publisher counts and logs. */
export type PublisherMetrics = Pick<GatewayMetrics, "publishLatency" | "published" | "publishRetries">;

export interface PublisherOptions {
  /** Publishes in flight across the gateway. */
  window: number;
  /** Ack timeout of one attempt. */
  timeoutMs: number;
  /** Give up (with an `unavailable` LogError) once the log has not taken an event for this long. */
  unavailableLimitMs: number;
}

/**
 * The gateway's way into the log: pipelined appends through one bounded
 * window, each retried with the same message id while the log is
 * unreachable, so a publish whose ack was lost is stored once.
 */
export class Publisher implements PipelinePublisher {
  readonly #window: AppendWindow;
  #epoch = 0;
  #connected = true;

  constructor(
    connection: PublisherConnection,
    private readonly opts: PublisherOptions,
    private readonly metrics: PublisherMetrics,
    private readonly logger: Pick<Logger, "warn">,
    /** The process's (PROCESS_CLOCK); the simulation's scheduler in the simulation. */
    private readonly clock: RetryClock,
  ) {
    this.#window = new AppendWindow(connection.appender, opts.window);
    const status = connection.statuses;
    if (status === undefined) return;
    void (async () => {
      for await (const s of status) {
        if (s.type === "disconnect") {
          this.#connected = false;
          this.#epoch++;
        } else if (s.type === "reconnect") {
          this.#connected = true;
        }
      }
    })().catch(() => {});
  }

  /**
   * Counts lost connections. Publishes started in different epochs may
   * reach the stream out of order (one lost in the dead socket, a later one
   * sent after the reconnect), so an ordered caller lets the older ones
   * settle before it starts a newer one.
   */
  get epoch(): number {
    return this.#epoch;
  }

  get connected(): boolean {
    return this.#connected;
  }

  /**
   * One attempt, started now if the shared window has a free slot, telling
   * `handler` how it ended (never before this returns); false when the
   * window is full (nothing was started). This runs for every agent message.
   */
  tryAttempt(event: Event, handler: AttemptHandler): boolean {
    return this.#window.tryStartWith(
      event,
      { timeoutMs: this.opts.timeoutMs },
      new Attempt(this.#published, event, this.clock.now(), handler),
    );
  }

  /**
   * Calls `taken` once the shared window has a free slot, from the call that
   * freed it, so an attempt started there takes it; `taken` returns whether
   * it did (see AppendWindow.whenFree). For a caller whose `tryAttempt`
   * just found the window full.
   */
  whenSlot(taken: () => boolean): void {
    this.#window.whenFree(taken);
  }

  readonly #published = (event: Event, started: number): void => {
    this.metrics.publishLatency.observe((this.clock.now() - started) / 1000);
    this.metrics.published(event.body.case ?? "unknown");
  };

  get inFlight(): number {
    return this.#window.inFlight;
  }

  /**
   * Appends `event`, retrying while the log is unavailable (appendRetrying:
   * the same message id, after 50 ms doubling to 1 s), until `limitMs`
   * (default: the configured limit) has passed or `signal` aborts. Errors
   * other than unavailability are not retried.
   */
  async append(event: Event, opts: { signal?: AbortSignal; limitMs?: number } = {}): Promise<Appended> {
    const started = this.clock.now();
    const r = await appendRetrying(event, (timeoutMs) => this.#window.append(event, { timeoutMs }), {
      clock: this.clock,
      timeoutMs: this.opts.timeoutMs,
      limitMs: opts.limitMs ?? this.opts.unavailableLimitMs,
      signal: opts.signal,
      onRetry: (attempt, err) => this.#retrying(event, attempt, err),
    });
    this.#published(event, started);
    return r;
  }

  #retrying(event: Event, attempt: number, err: LogError): void {
    this.metrics.publishRetries.inc();
    if (attempt === 1 || attempt % 20 === 0) {
      this.logger.warn({ event: event.id, attempt, err: err.message }, "log unavailable; retrying publish");
    }
  }
}

/** One attempt in flight: counted as published when the log acks it. */
class Attempt implements AppendHandler {
  constructor(
    private readonly published: (event: Event, started: number) => void,
    private readonly event: Event,
    private readonly started: number,
    private readonly handler: AttemptHandler,
  ) {}

  appended(a: Appended): void {
    this.published(this.event, this.started);
    this.handler.stored(a);
  }

  failed(err: LogError): void {
    this.handler.failed(err);
  }
}
