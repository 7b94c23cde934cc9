/**
 * Follows the routing table in the endpoints KV bucket
 * (src/reconciler/runner/endpoints-bucket.ts) with direct gets, holding no
 * consumer (the router's credentials may create none: docs/SECURITY.md,
 * "Consumers"): the last value of every key as of the stream's last
 * sequence (`multi_last`), then the bucket stream's next sequences in
 * order, asked for every TABLE_POLL_MS while nothing new is there.
 *
 * Through a NATS outage the table in memory stays as it was and requests
 * keep being routed with it; `stale` says so (a metric and /healthz). The
 * follow resumes after the last sequence it applied when NATS is back.
 */
import { type JetStreamManager, jetstreamManager, type StoredMsg } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { isLogError, logErrorFrom } from "../log/index.js";
import { modelOfEndpointsKey } from "../reconciler/runner/endpoints-bucket.js";
import { endpointListSchema, type RoutingTable } from "./table.js";

/**
 * How often the follower asks for new table entries while there are none
 * (ms): a change is applied at most this long (plus a round trip) after it
 * is stored, at 50 small requests a second per router.
 */
export const TABLE_POLL_MS = 20;

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
    let jsm: JetStreamManager | undefined;
    // The next sequence of the bucket's stream to apply; 0 until the table was read whole.
    let cursor = 0;
    let lastProblem = "";
    while (!this.#stopped) {
      try {
        jsm ??= await jetstreamManager(this.nc);
        if (cursor === 0) {
          // The last value of every key as of one sequence, then what follows it.
          const upTo = (await jsm.streams.info(stream)).state.last_seq;
          if (upTo > 0) {
            const last = await jsm.direct.getLastMessagesFor(stream, {
              multi_last: [`${prefix}>`],
              up_to_seq: upTo,
            });
            for await (const m of last) this.#apply(m, prefix);
          }
          cursor = upTo + 1;
          this.#markLoaded();
        }
        for (;;) {
          if (this.#stopped) return;
          const got: StoredMsg[] = [];
          try {
            for await (const m of await jsm.direct.getBatch(stream, { seq: cursor, batch: 256 })) got.push(m);
          } catch (err) {
            // Nothing at or after the cursor yet: the usual answer.
            if (!isLogError(logErrorFrom(err), "not-found")) throw err;
          }
          for (const m of got) {
            this.#apply(m, prefix);
            cursor = m.seq + 1;
          }
          if (lastProblem !== "") {
            lastProblem = "";
            this.#setStale(false);
          }
          if (got.length === 0) await new Promise((r) => setTimeout(r, TABLE_POLL_MS));
        }
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

  /** One stored entry of the bucket applied to the table. */
  #apply(m: StoredMsg, prefix: string): void {
    const model = modelOfEndpointsKey(m.subject.slice(prefix.length));
    const op = m.header?.get("KV-Operation") ?? "";
    if (op === "DEL" || op === "PURGE") this.table.set(model, []);
    else {
      const parsed = endpointListSchema.safeParse(safeJson(m.string()));
      if (parsed.success) this.table.set(model, parsed.data);
      else {
        // Never route to what the table does not clearly say is ready.
        this.table.set(model, []);
        this.opts.logger.error(
          { model, seq: m.seq, issues: parsed.error.issues.slice(0, 3) },
          "routing table value not understood; the model gets no requests until it is written again",
        );
      }
    }
    this.opts.onApplied?.(m.time.getTime());
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
