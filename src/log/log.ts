import { type JetStreamClient, type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Event } from "../gen/llmgw/v1/events_pb.js";
import { AckedPublisher } from "./acked-publish.js";
import { type Appended, type AppendOptions, LogAppender } from "./append.js";
import { connectNats } from "./connect.js";
import { LogError } from "./errors.js";
import type { NatsSecurity } from "./nats-credentials.js";
import { type LogRecord, type ReadOptions, readEventBatches, readEvents } from "./reader.js";
import { DEFAULT_STREAM_CONFIG, ensureStream, type LogStreamConfig } from "./stream.js";
import { Subjects } from "./subjects.js";

export interface OpenLogOptions extends Partial<LogStreamConfig> {
  /** NATS URL(s), comma-separated. */
  url: string;
  /** Connection name, shown by the server (e.g. "llmgw-gateway gw-1"). */
  clientName: string;
  /** Create the stream if missing and check it (default true). */
  ensure?: boolean;
  /**
   * With `ensure`, also bring an existing stream's adjustable settings to
   * this configuration (default true). False for processes that may create
   * the stream but not change it (see docs/SECURITY.md, "NATS credentials").
   */
  updateStream?: boolean;
  /** Credentials and TLS for the NATS connection. */
  security?: NatsSecurity;
  /** Told when the existing stream is weaker than llmgw makes it (see `ensureStream`). */
  warn?: (message: string) => void;
  /**
   * How `read` and `readBatches` read unless told otherwise (default
   * "consumer"): "direct" for credentials that may create no consumer (the
   * reader role; see `ReadOptions.via`).
   */
  readVia?: "consumer" | "direct";
}

/** A connection to the log: its stream, subjects, appender and reader. */
export class Log {
  readonly subjects: Subjects;
  readonly appender: LogAppender;

  constructor(
    readonly nc: NatsConnection,
    readonly js: JetStreamClient,
    readonly jsm: JetStreamManager,
    readonly stream: string,
    prefix: string,
    /** Replicas of the stream, also used for the KV buckets processes create beside it. */
    readonly replicas = 1,
    /** How reads go unless a read says otherwise (`OpenLogOptions.readVia`). */
    readonly readVia: "consumer" | "direct" = "consumer",
  ) {
    this.subjects = new Subjects(prefix);
    this.appender = new LogAppender(new AckedPublisher(nc), stream, prefix);
  }

  append(event: Event, opts?: AppendOptions): Promise<Appended> {
    return this.appender.append(event, opts);
  }

  read(opts?: ReadOptions): AsyncGenerator<LogRecord> {
    return readEvents(this.js, this.jsm, this.stream, this.subjects, { via: this.readVia, ...opts });
  }

  /** `read` a batch at a time (whatever had arrived), for folds: see `readEventBatches`. */
  readBatches(opts?: ReadOptions): AsyncGenerator<LogRecord[]> {
    return readEventBatches(this.js, this.jsm, this.stream, this.subjects, { via: this.readVia, ...opts });
  }

  /** The stream's last sequence now (0 when empty). */
  async lastSeq(): Promise<number> {
    try {
      return (await this.jsm.streams.info(this.stream)).state.last_seq;
    } catch (err) {
      throw LogError.from(err, `reading stream ${this.stream}`);
    }
  }

  /** The sequence of the last message on `subject` (0 when there is none). */
  async lastSubjectSeq(subject: string): Promise<number> {
    try {
      const m = await this.jsm.streams.getMessage(this.stream, { last_by_subj: subject });
      return m?.seq ?? 0;
    } catch (err) {
      const e = LogError.from(err, `reading the last message of ${subject}`);
      if (e.code === "not-found") return 0;
      throw e;
    }
  }

  /**
   * Drains the connection (in-flight publishes and subscriptions finish),
   * but never waits more than `drainTimeoutMs`: a server that stopped
   * answering must not keep a process from exiting.
   */
  async close(drainTimeoutMs = 5000): Promise<void> {
    if (this.nc.isClosed()) return;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), drainTimeoutMs);
    });
    const drained = this.nc.drain().then(
      () => "drained" as const,
      () => "failed" as const,
    );
    const outcome = await Promise.race([drained, timedOut]);
    clearTimeout(timer);
    if (outcome !== "drained" && !this.nc.isClosed()) await this.nc.close().catch(() => {});
  }
}

/** Connects to NATS and opens (by default creating or checking) the log stream. */
export async function openLog(opts: OpenLogOptions): Promise<Log> {
  const cfg = { ...DEFAULT_STREAM_CONFIG, ...stripUndefined(opts) };
  const nc = await connectNats({
    url: opts.url,
    name: opts.clientName,
    ...(opts.security ? { security: opts.security } : {}),
  });
  try {
    const jsm = await jetstreamManager(nc);
    if (opts.ensure !== false) {
      await ensureStream(jsm, cfg, {
        update: opts.updateStream !== false,
        ...(opts.warn ? { warn: opts.warn } : {}),
      });
    }
    const js = jetstream(nc);
    return new Log(nc, js, jsm, cfg.name, cfg.prefix, cfg.replicas, opts.readVia ?? "consumer");
  } catch (err) {
    await nc.close();
    throw LogError.from(err, "opening the log");
  }
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
