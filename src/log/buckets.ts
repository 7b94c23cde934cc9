/**
 * The key-value buckets beside the log, created and checked the one way
 * (docs/SECURITY.md, "Buckets"). llmgw only ever puts and deletes keys
 * (a delete is a put of a marker), so a bucket's stream refuses everything
 * else: `Nats-Rollup` headers (one such publish would wipe the bucket: the
 * `@nats-io/kv` library allows them), purges and message deletes through
 * the API, and more than `maxConsumers` consumers at once.
 *
 * Reading a bucket needs no consumer: its keys come from the stream's
 * subject counts and its values from message gets (`bucketKeys`,
 * `KV.get`), so a role that only reads buckets is granted no consumer
 * creation on them (src/nats-auth/permissions.ts).
 */
import {
  DiscardPolicy,
  type JetStreamClient,
  type JetStreamManager,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
  type StreamInfo,
} from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import { nanos } from "@nats-io/transport-node";
import { LogError, logErrorFrom } from "./errors.js";

/** Consumers one bucket's stream allows at once (a watch per gateway or reconciler, and a margin). */
export const BUCKET_MAX_CONSUMERS = 256;

export interface BucketOptions {
  /** Values kept per key. */
  history: number;
  /** Entries expire after this long (the lease buckets); none when absent. */
  ttlMs?: number;
  replicas?: number;
  /** Consumers allowed at once (default BUCKET_MAX_CONSUMERS). */
  maxConsumers?: number;
  /** Create the bucket when it does not exist (default true). */
  create?: boolean;
  /**
   * Told when an existing bucket is weaker than this version makes them
   * (an earlier version created it): the roles that open buckets may not
   * change them, so an administrator must. Default: a process warning.
   */
  warn?: (message: string) => void;
}

/** The bucket's stream: what `Kvm.create` writes, but for puts only (no rollup, purge or API delete) and a consumer limit. */
export function bucketStreamConfig(
  bucket: string,
  opts: BucketOptions,
): Partial<StreamConfig> & { name: string } {
  return {
    name: `KV_${bucket}`,
    subjects: [`$KV.${bucket}.>`],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    discard: DiscardPolicy.New,
    max_msgs_per_subject: opts.history,
    max_msg_size: -1,
    max_age: opts.ttlMs && opts.ttlMs > 0 ? nanos(opts.ttlMs) : 0,
    num_replicas: opts.replicas ?? 1,
    allow_direct: true,
    allow_rollup_hdrs: false,
    deny_delete: true,
    deny_purge: true,
    max_consumers: opts.maxConsumers ?? BUCKET_MAX_CONSUMERS,
  };
}

/** What of `have` is weaker than `wanted` (the settings that keep a bucket or the log from being rewritten), in words. */
export function weakerSettings(
  have: Partial<StreamConfig>,
  wanted: Pick<StreamConfig, "max_consumers"> & {
    /** Purges are wanted (the log: the archiver purges what it archived). */
    purgeable?: boolean;
  },
): string[] {
  const out: string[] = [];
  if (have.allow_rollup_hdrs) out.push("it accepts Nats-Rollup headers (one publish can wipe it)");
  if (!have.deny_purge && wanted.purgeable !== true) out.push("it may be purged");
  if (!have.deny_delete) out.push("its messages may be deleted through the API");
  const max = have.max_consumers ?? -1;
  if (max <= 0 || max > wanted.max_consumers) {
    out.push(
      `it allows ${max <= 0 ? "any number of" : max} consumers (at most ${wanted.max_consumers} wanted)`,
    );
  }
  return out;
}

/**
 * Opens `bucket`, creating its stream with `bucketStreamConfig` when it is
 * missing (and `create` is not false; undefined then). An existing one is
 * checked: its subjects must be the bucket's, and settings weaker than
 * wanted are reported through `warn` with what to do.
 */
export async function openBucket(
  js: JetStreamClient,
  bucket: string,
  opts: BucketOptions & { create: false },
): Promise<KV | undefined>;
export async function openBucket(js: JetStreamClient, bucket: string, opts: BucketOptions): Promise<KV>;
export async function openBucket(
  js: JetStreamClient,
  bucket: string,
  opts: BucketOptions,
): Promise<KV | undefined> {
  const jsm = await js.jetstreamManager();
  const wanted = bucketStreamConfig(bucket, opts);
  let info = await streamInfo(jsm, wanted.name);
  if (!info) {
    if (opts.create === false) return undefined;
    try {
      info = await jsm.streams.add(wanted);
    } catch (err) {
      const e = logErrorFrom(err, `creating the bucket ${bucket}`);
      // Another process created it at the same moment: check theirs like any existing one.
      info = await streamInfo(jsm, wanted.name);
      if (!info) throw e;
    }
  }
  const have = info.config;
  if (!have.subjects?.includes(`$KV.${bucket}.>`)) {
    throw new LogError(
      "incompatible-stream",
      `stream ${wanted.name} exists with subjects ${JSON.stringify(have.subjects)}: it is not the bucket ${bucket}`,
    );
  }
  const weaker = weakerSettings(have, { max_consumers: wanted.max_consumers as number });
  if (weaker.length > 0) {
    const warn = opts.warn ?? ((m: string) => process.emitWarning(m));
    warn(
      `bucket ${bucket} was created by an earlier version and is weaker than llmgw makes buckets: ${weaker.join("; ")}. ` +
        `An administrator fixes it with \`nats stream edit ${wanted.name} --no-allow-rollup --deny-purge --deny-delete\` ` +
        "(a consumer limit takes recreating the bucket); see docs/SECURITY.md",
    );
  }
  return new Kvm(js).open(bucket, { allow_direct: have.allow_direct === true });
}

/** The stream `name`, or undefined when there is none (any other failure is thrown). */
export async function streamInfo(jsm: JetStreamManager, name: string): Promise<StreamInfo | undefined> {
  try {
    return await jsm.streams.info(name);
  } catch (err) {
    const e = logErrorFrom(err, `looking up stream ${name}`);
    if (e.code === "not-found") return undefined;
    throw e;
  }
}

/**
 * The keys of `bucket` matching `filter` (NATS wildcards, default every
 * key) that hold a value, with no consumer: the stream's per-subject
 * counts name the keys, and a key whose last entry is a delete or purge
 * marker is left out (one message get per key). For small key sets: the
 * snapshots' manifests.
 */
export async function bucketKeys(
  kv: KV,
  jsm: JetStreamManager,
  bucket: string,
  filter = ">",
): Promise<string[]> {
  const prefix = `$KV.${bucket}.`;
  const info = await jsm.streams.info(`KV_${bucket}`, { subjects_filter: `${prefix}${filter}` });
  const subjects = Object.keys(info.state.subjects ?? {});
  const keys: string[] = [];
  for (const subject of subjects) {
    const key = subject.slice(prefix.length);
    const entry = await kv.get(key);
    if (entry?.operation === "PUT") keys.push(key);
  }
  return keys.sort();
}
