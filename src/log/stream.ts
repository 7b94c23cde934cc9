import type { JetStreamManager, StreamConfig, StreamInfo } from "@nats-io/jetstream";
import { DiscardPolicy, RetentionPolicy, StorageType } from "@nats-io/jetstream";
import { nanos } from "@nats-io/transport-node";
import { streamInfo, weakerSettings } from "./buckets.js";
import { LogError, logErrorFrom } from "./errors.js";
import { DEFAULT_PREFIX, DEFAULT_STREAM } from "./subjects.js";

export interface LogStreamConfig {
  /** Stream name; default "LLMGW". */
  name: string;
  /** Subject prefix; the stream takes `<prefix>.>`. Default "llmgw.evt". */
  prefix: string;
  /** 1 in development, 3 in production. */
  replicas: number;
  /** Window in which a retried publish (same Nats-Msg-Id) is stored once; ≥ 2 min. */
  duplicateWindowMs: number;
  /**
   * Oldest events are removed past this age; 0 keeps everything (the
   * default, and what an archived log needs: its retention is the
   * archiver's, `--log-max-age`, which removes only what it archived; a
   * limit here would drop unarchived history, and the archiver stops on
   * the gap it leaves).
   */
  maxAgeMs: number;
  /** Oldest events are removed past this size in bytes; -1 is unlimited (the default; see maxAgeMs). */
  maxBytes: number;
  /**
   * Consumers the stream allows at once (every reader, follower and watch
   * of every process holds one). Set when the stream is created: the server
   * cannot change it afterwards.
   */
  maxConsumers: number;
  /**
   * The first sequence of a stream created now (a restore: the history
   * before it is in the archive). Ignored for an existing stream.
   */
  firstSeq?: number;
}

export const DEFAULT_STREAM_CONFIG: LogStreamConfig = {
  name: DEFAULT_STREAM,
  prefix: DEFAULT_PREFIX,
  replicas: 1,
  duplicateWindowMs: 2 * 60_000,
  maxAgeMs: 0,
  maxBytes: -1,
  maxConsumers: 1024,
};

const MIN_DUPLICATE_WINDOW_MS = 2 * 60_000;

/**
 * Creates the log stream, or checks that the existing one is usable and
 * (unless `update` is false) brings its adjustable settings (replicas,
 * duplicate window, limits) to the configuration. A stream whose subjects or
 * storage differ is refused rather than silently changed: it may belong to
 * something else. `update: false` is for processes whose NATS credentials
 * may create a missing stream but not change one (an update can shrink the
 * limits and so drop history): they use the stream as it is.
 *
 * The log is only ever appended to: the stream refuses `Nats-Rollup`
 * headers and message deletes, and allows `maxConsumers` consumers; it may
 * be purged, by the archiver's role alone, below what it has archived. It
 * allows direct gets: the reader and router roles read it with them,
 * holding no consumer (src/log/direct-read.ts). An existing stream is checked for these too; what `update`
 * may fix is fixed, the rest (the consumer limit cannot be changed on an
 * existing stream) is told to `warn` (default: a process warning).
 */
export async function ensureStream(
  jsm: JetStreamManager,
  partial: Partial<LogStreamConfig> = {},
  opts: { update?: boolean; warn?: (message: string) => void } = {},
): Promise<StreamInfo> {
  const cfg = { ...DEFAULT_STREAM_CONFIG, ...partial };
  if (!Number.isInteger(cfg.replicas) || cfg.replicas < 1 || cfg.replicas > 5) {
    throw new LogError(
      "invalid-argument",
      `stream replicas must be an integer from 1 to 5, got ${cfg.replicas}`,
    );
  }
  if (cfg.duplicateWindowMs < MIN_DUPLICATE_WINDOW_MS) {
    throw new LogError(
      "invalid-argument",
      `duplicate window must be at least 2 minutes (a retried publish must be stored once), got ${cfg.duplicateWindowMs} ms`,
    );
  }
  const subject = `${cfg.prefix}.>`;
  const wanted: Partial<StreamConfig> & { name: string } = {
    name: cfg.name,
    subjects: [subject],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    num_replicas: cfg.replicas,
    duplicate_window: nanos(cfg.duplicateWindowMs),
    max_age: cfg.maxAgeMs > 0 ? nanos(cfg.maxAgeMs) : 0,
    max_bytes: cfg.maxBytes,
    // A pass or a session carries a whole registration; keep room for big fleets.
    max_msg_size: 8 * 1024 * 1024,
    allow_rollup_hdrs: false,
    deny_delete: true,
    // Purges stay possible: the archiver removes archived segments (retention,
    // docs/history.md); only its role's credentials may (src/nats-auth/permissions.ts).
    deny_purge: false,
    max_consumers: cfg.maxConsumers,
    ...(cfg.firstSeq !== undefined && cfg.firstSeq > 1 ? { first_seq: cfg.firstSeq } : {}),
    // The reader and router roles read it with direct gets, never a consumer (src/log/direct-read.ts).
    allow_direct: true,
  };

  const existing = await streamInfo(jsm, cfg.name);

  if (!existing) {
    try {
      return await jsm.streams.add(wanted);
    } catch (err) {
      throw logErrorFrom(err, `creating stream ${cfg.name}`);
    }
  }

  const have = existing.config;
  if (have.storage !== StorageType.File) {
    throw new LogError(
      "incompatible-stream",
      `stream ${cfg.name} exists with ${have.storage} storage; the log needs file storage. Use another --stream name or remove it`,
    );
  }
  if (!have.subjects.includes(subject)) {
    throw new LogError(
      "incompatible-stream",
      `stream ${cfg.name} exists with subjects ${JSON.stringify(have.subjects)}, not "${subject}". Use another --stream name or fix its subjects`,
    );
  }
  const guardsDrift =
    have.allow_rollup_hdrs === true || have.deny_delete !== true || have.allow_direct !== true;
  const drift =
    guardsDrift ||
    have.num_replicas !== wanted.num_replicas ||
    have.duplicate_window !== wanted.duplicate_window ||
    have.max_age !== wanted.max_age ||
    have.max_bytes !== wanted.max_bytes ||
    have.max_msg_size !== wanted.max_msg_size;
  let info = existing;
  if (drift && opts.update !== false) {
    try {
      info = await jsm.streams.update(cfg.name, {
        num_replicas: wanted.num_replicas,
        duplicate_window: wanted.duplicate_window,
        max_age: wanted.max_age,
        max_bytes: wanted.max_bytes,
        max_msg_size: wanted.max_msg_size,
        allow_rollup_hdrs: false,
        deny_delete: true,
        allow_direct: true,
      } as Partial<StreamConfig>);
    } catch (err) {
      throw logErrorFrom(err, `updating stream ${cfg.name}`);
    }
  }
  const weaker = weakerSettings(info.config, { max_consumers: cfg.maxConsumers, purgeable: true });
  if (info.config.allow_direct !== true) {
    weaker.push(
      "it allows no direct gets (the reader and router roles, which read with them, cannot read it)",
    );
  }
  if (weaker.length > 0) {
    const warn = opts.warn ?? ((m: string) => process.emitWarning(m));
    warn(
      `stream ${cfg.name} is weaker than llmgw makes the log: ${weaker.join("; ")}. ` +
        (opts.update === false
          ? "`llmgw api` (whose credentials may update the stream) fixes what can be changed; "
          : "") +
        "a consumer limit takes recreating the stream; see docs/SECURITY.md",
    );
  }
  return info;
}
