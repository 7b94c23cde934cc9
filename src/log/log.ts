import { type JetStreamClient, type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Event } from "../gen/llmgw/v1/events_pb.js";
import type { NatsSecurity } from "../nats-auth/index.js";
import { AckedPublisher } from "./acked-publish.js";
import { type Appended, type AppendOptions, LogAppender } from "./append.js";
import {
  Archive,
  type ArchiveStore,
  DirectoryArchiveStore,
  defaultArchiveBucket,
  NatsObjectArchiveStore,
  readAcrossArchive,
  type S3ArchiveConfig,
  S3ArchiveStore,
} from "./archive/index.js";
import { connectNats } from "./connect.js";
import { isLogError, LogError, logErrorFrom } from "./errors.js";
import { type LogRecord, type ReadOptions, readEventBatches } from "./reader.js";
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
  /**
   * Where the archive of this log is (what the stream no longer holds):
   * default the Object Store bucket `<stream>-archive` of the same NATS;
   * false: the stream only.
   */
  archive?: ArchiveLocation | false;
}

/** Where a log's archive is kept (`--archive`). */
export type ArchiveLocation =
  | { kind: "nats"; bucket?: string }
  | { kind: "directory"; path: string }
  | { kind: "s3"; s3: S3ArchiveConfig }
  | { kind: "store"; store: ArchiveStore };

function archiveStoreAt(
  where: ArchiveLocation,
  nc: NatsConnection,
  stream: string,
  replicas: number,
): ArchiveStore {
  switch (where.kind) {
    case "nats":
      return new NatsObjectArchiveStore(nc, where.bucket ?? defaultArchiveBucket(stream), replicas);
    case "directory":
      return new DirectoryArchiveStore(where.path);
    case "s3":
      return new S3ArchiveStore(where.s3);
    case "store":
      return where.store;
    default: {
      const never: never = where;
      throw new LogError("invalid-argument", `unknown archive location ${JSON.stringify(never)}`);
    }
  }
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
    /** What the stream no longer holds (docs/history.md); reads cross into it transparently. */
    readonly archive?: Archive,
  ) {
    this.subjects = new Subjects(prefix);
    this.appender = new LogAppender(new AckedPublisher(nc), stream, prefix);
  }

  /**
   * Appends; `expectLastSubjectSeq` fences as the stream would, also once
   * the subject's last message was archived and purged from the stream (the
   * stream then knows no message on it: every later one would still be
   * there, so "none" is the same condition, checked again by the server).
   */
  async append(event: Event, opts?: AppendOptions): Promise<Appended> {
    try {
      return await this.appender.append(event, opts);
    } catch (err) {
      const expected = opts?.expectLastSubjectSeq;
      if (!expected || !isLogError(err, "wrong-last-sequence")) throw err;
      if (expected >= (await this.bounds()).firstSeq) throw err;
      return this.appender.append(event, { ...opts, expectLastSubjectSeq: 0 });
    }
  }

  async *read(opts?: ReadOptions): AsyncGenerator<LogRecord> {
    for await (const batch of this.readBatches(opts)) yield* batch;
  }

  /**
   * `read` a batch at a time (whatever had arrived), for folds: see
   * `readEventBatches`. What the stream no longer holds is read from the
   * archive, in the same run of sequences.
   */
  readBatches(opts: ReadOptions = {}): AsyncGenerator<LogRecord[]> {
    const fromStream = (o: ReadOptions) =>
      readEventBatches(this.js, this.jsm, this.stream, this.subjects, { via: this.readVia, ...o });
    if (!this.archive) return fromStream(opts);
    return readAcrossArchive(this.archive, { read: fromStream, bounds: () => this.bounds() }, opts);
  }

  /** The stream's first and last sequence and its bytes now (first is last + 1 when empty). */
  async bounds(): Promise<{ firstSeq: number; lastSeq: number; bytes: number }> {
    try {
      const { state } = await this.jsm.streams.info(this.stream);
      return { firstSeq: state.first_seq, lastSeq: state.last_seq, bytes: state.bytes };
    } catch (err) {
      throw logErrorFrom(err, `reading stream ${this.stream}`);
    }
  }

  /** The stream's last sequence now (0 when empty). */
  async lastSeq(): Promise<number> {
    try {
      return (await this.jsm.streams.info(this.stream)).state.last_seq;
    } catch (err) {
      throw logErrorFrom(err, `reading stream ${this.stream}`);
    }
  }

  /** The sequence of the last message on `subject` (0 when there is none). */
  async lastSubjectSeq(subject: string): Promise<number> {
    try {
      const m = await this.jsm.streams.getMessage(this.stream, { last_by_subj: subject });
      return m?.seq ?? 0;
    } catch (err) {
      const e = logErrorFrom(err, `reading the last message of ${subject}`);
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
    const archive =
      opts.archive === false
        ? undefined
        : new Archive(archiveStoreAt(opts.archive ?? { kind: "nats" }, nc, cfg.name, cfg.replicas));
    return new Log(nc, js, jsm, cfg.name, cfg.prefix, cfg.replicas, opts.readVia ?? "consumer", archive);
  } catch (err) {
    await nc.close();
    throw logErrorFrom(err, "opening the log");
  }
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
