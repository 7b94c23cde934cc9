/**
 * Follows the routing table in the endpoints KV bucket
 * (src/reconciler/runner/endpoints-bucket.ts) with an ordered pull consumer
 * on the bucket's stream: the last message of every key first, then each
 * new one as it is written. Never a KV watch: that is a push consumer, which
 * the router's read-only credentials may not create (docs/SECURITY.md).
 *
 * Through a NATS outage the table in memory stays as it was and requests
 * keep being routed with it; `stale` says so (a metric and /healthz). The
 * ordered consumer resumes after the last message it saw when NATS is back.
 */
import { type ConsumerMessages, DeliverPolicy, jetstream } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { modelOfEndpointsKey } from "../reconciler/runner/endpoints-bucket.js";
import { endpointListSchema, type RoutingTable } from "./table.js";

export interface TableFollowerOptions {
  bucket: string;
  logger: Logger;
  /** A table change was applied; `writtenMs` is when the bucket stored it. */
  onApplied?: (writtenMs: number) => void;
  /** The table became stale (true) or followed again (false). */
  onStale?: (stale: boolean) => void;
  /** Wait this long between attempts while the bucket does not exist. */
  retryMs?: number;
}

export class TableFollower {
  #loaded = false;
  #stale = true;
  #staleSince = Date.now();
  #messages: ConsumerMessages | undefined;
  #stopped = false;
  readonly #loadedWaiters: Array<() => void> = [];

  constructor(
    private readonly nc: NatsConnection,
    private readonly table: RoutingTable,
    private readonly opts: TableFollowerOptions,
  ) {}

  /** True once the whole table was read once. */
  get loaded(): boolean {
    return this.#loaded;
  }

  /** True while the router cannot hear table changes (NATS unreachable, or not read yet). */
  get stale(): boolean {
    return this.#stale;
  }

  /** Since when it is stale (ms since the epoch); meaningless while it is not. */
  get staleSince(): number {
    return this.#staleSince;
  }

  /** Starts following; resolves once the table was read whole. */
  start(): Promise<void> {
    void this.#watchConnection();
    void this.#run();
    return new Promise((resolve) => {
      if (this.#loaded) resolve();
      else this.#loadedWaiters.push(resolve);
    });
  }

  stop(): void {
    this.#stopped = true;
    this.#messages?.stop();
  }

  #setStale(stale: boolean): void {
    if (stale === this.#stale) return;
    this.#stale = stale;
    if (stale) this.#staleSince = Date.now();
    this.opts.onStale?.(stale);
    this.opts.logger[stale ? "warn" : "info"](
      { bucket: this.opts.bucket },
      stale
        ? "routing table stale: NATS unreachable; serving the last table"
        : "routing table followed again",
    );
  }

  #markLoaded(): void {
    if (!this.#loaded) {
      this.#loaded = true;
      this.opts.logger.info(
        { bucket: this.opts.bucket, models: this.table.servedModels() },
        "routing table loaded",
      );
      for (const w of this.#loadedWaiters.splice(0)) w();
    }
    this.#setStale(false);
  }

  async #watchConnection(): Promise<void> {
    for await (const s of this.nc.status()) {
      if (this.#stopped) return;
      if (s.type === "disconnect") this.#setStale(true);
      else if (s.type === "reconnect" && this.#loaded) this.#setStale(false);
    }
  }

  async #run(): Promise<void> {
    const stream = `KV_${this.opts.bucket}`;
    const prefix = `$KV.${this.opts.bucket}.`;
    const js = jetstream(this.nc);
    let lastProblem = "";
    while (!this.#stopped) {
      try {
        const consumer = await js.consumers.get(stream, {
          filter_subjects: [`${prefix}>`],
          deliver_policy: DeliverPolicy.LastPerSubject,
        });
        const info = await consumer.info(true);
        if (info.num_pending === 0) this.#markLoaded();
        const messages = await consumer.consume({ max_messages: 256 });
        this.#messages = messages;
        void this.#watchConsumer(messages);
        for await (const m of messages) {
          const model = modelOfEndpointsKey(m.subject.slice(prefix.length));
          const op = m.headers?.get("KV-Operation") ?? "";
          if (op === "DEL" || op === "PURGE") this.table.set(model, []);
          else {
            const parsed = endpointListSchema.safeParse(safeJson(m.string()));
            if (parsed.success) this.table.set(model, parsed.data);
            else {
              // Never route to what the table does not clearly say is ready.
              this.table.set(model, []);
              this.opts.logger.error(
                { model, seq: m.seq, issues: parsed.success ? [] : parsed.error.issues.slice(0, 3) },
                "routing table value not understood; the model gets no requests until it is written again",
              );
            }
          }
          this.opts.onApplied?.(m.info.timestampNanos / 1_000_000);
          if (m.info.pending === 0) this.#markLoaded();
        }
        if (this.#stopped) return;
      } catch (err) {
        if (this.#stopped) return;
        this.#setStale(true);
        const problem = (err as Error).message;
        // Said once per problem, not at every retry.
        if (problem !== lastProblem) {
          this.opts.logger.warn(
            { bucket: this.opts.bucket, err: problem },
            "cannot read the routing table; trying again every second (until then: the last table, or none)",
          );
        }
        lastProblem = problem;
      }
      await new Promise((r) => setTimeout(r, this.opts.retryMs ?? 1000));
    }
  }

  async #watchConsumer(messages: ConsumerMessages): Promise<void> {
    try {
      for await (const s of messages.status()) {
        if (this.#stopped) return;
        if (s.type === "heartbeats_missed") this.#setStale(true);
        else if (s.type === "ordered_consumer_recreated" && this.#loaded) this.#setStale(false);
      }
    } catch {
      // The consume ended.
    }
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
