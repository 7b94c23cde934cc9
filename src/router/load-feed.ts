/**
 * The load feed: the queue depth and KV-cache use replicas report, read from
 * the log's node events (UsageChanged.shard_load, which gateways append when
 * a shard's load moves past their thresholds). The router follows the node
 * subjects with direct gets from a few minutes back (a load that has not
 * moved since is not written again), then as they come, asking again every
 * DIRECT_POLL_MS at the end (src/log/direct-read.ts): the router's
 * credentials may create no consumer (docs/SECURITY.md, "Consumers").
 *
 * A shard's load is its replica's when it is rank 0: the queue of a replica
 * is on its rank 0. Shard ids are `<replica id>-s<rank>-<seq>` (the
 * reconciler names them so, src/reconciler/decide/pass.ts), which is how a
 * report finds its replica without the fleet's state.
 */
import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import type { Logger } from "pino";
import { readEvents, Subjects } from "../log/index.js";
import type { ReplicaBook } from "./replicas.js";

/** The replica of a rank-0 shard id; undefined for other ranks or ids of another form. */
export function replicaOfRankZeroShard(shardId: string): string | undefined {
  const m = /^(.+)-s0-\d+$/.exec(shardId);
  return m ? m[1] : undefined;
}

export interface LoadFeedOptions {
  stream: string;
  prefix: string;
  /** How far back to read at start (ms). */
  lookbackMs: number;
  logger: Logger;
}

export class LoadFeed {
  readonly #abort = new AbortController();
  /** Reads check each event's subject against its kind, as every reader of the log does. */
  readonly #subjects: Subjects;

  constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly book: ReplicaBook,
    private readonly opts: LoadFeedOptions,
  ) {
    this.#subjects = new Subjects(opts.prefix);
  }

  start(): void {
    void this.#run();
  }

  stop(): void {
    this.#abort.abort();
  }

  async #run(): Promise<void> {
    let from: { fromTimeMs: number } | { fromSeq: number } = {
      fromTimeMs: Date.now() - this.opts.lookbackMs,
    };
    let lastProblem = "";
    while (!this.#abort.signal.aborted) {
      try {
        for await (const r of readEvents(this.js, this.jsm, this.opts.stream, this.#subjects, {
          ...from,
          follow: true,
          subjects: [`${this.opts.prefix}.node.*`],
          signal: this.#abort.signal,
          // Load is advice: an event that cannot be read is passed over.
          onMalformed: () => {},
          batch: 1024,
          via: "direct",
        })) {
          from = { fromSeq: r.seq + 1 };
          if (lastProblem !== "") {
            lastProblem = "";
            this.opts.logger.info({ stream: this.opts.stream }, "load feed following the log again");
          }
          if (r.event.body.case !== "usageChanged") continue;
          for (const l of r.event.body.value.shardLoad) {
            const replicaId = replicaOfRankZeroShard(l.shardId);
            if (replicaId === undefined) continue;
            this.opts.logger.debug({ replicaId, queueDepth: l.queueDepth, kvCacheUse: l.kvCacheUse }, "load");
            this.book.setLoad(replicaId, {
              queueDepth: l.queueDepth,
              kvCacheUse: Number.isFinite(l.kvCacheUse) ? Math.min(1, Math.max(0, l.kvCacheUse)) : 0,
            });
          }
        }
      } catch (err) {
        if (this.#abort.signal.aborted) return;
        const problem = (err as Error).message;
        // Said once per problem, not at every retry.
        if (problem !== lastProblem) {
          this.opts.logger.warn(
            { stream: this.opts.stream, err: problem },
            "the load feed stopped; reading it again (replicas are weighted by requests in flight meanwhile)",
          );
        }
        lastProblem = problem;
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}
