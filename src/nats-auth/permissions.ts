/**
 * What each llmgw role may publish and subscribe to on NATS: the least each
 * process needs (docs/SECURITY.md, "NATS credentials"). Pure: subjects
 * only, rendered into the server's configuration by `llmgw nats-auth init`.
 *
 * How JetStream maps onto permissions: an append is a publish to the
 * event's subject with a reply inbox (the stream's ack comes back there); a
 * KV write is a publish to `$KV.<bucket>.<key>`; reading is JetStream API
 * requests (`$JS.API.…`: stream info, consumer create/next/delete, direct
 * and message get) whose answers, like consumer deliveries, arrive on
 * `_INBOX.…`. The roles that only read (reader, router) get no consumer
 * API at all: NATS cannot tell a push consumer's create from a pull
 * consumer's by subject (nats-server issue #8274), so they read with
 * batched direct gets (src/log/direct-read.ts).
 */
import { EngineLogSubjects } from "../engine-logs/subjects.js";
import { DEFAULT_PREFIX, DEFAULT_STREAM } from "../log/index.js";

export const NATS_ROLES = ["gateway", "reconciler", "api", "reader", "router", "archiver"] as const;
export type NatsRole = (typeof NATS_ROLES)[number];

/** The KV buckets beside the log, by what they hold. */
export interface Buckets {
  /** The reconciler's leader lease (`llmgw reconciler --lease-bucket`). */
  leases: string;
  /** One key per live gateway (`llmgw gateway --lease-bucket`, `llmgw reconciler --gateways-bucket`). */
  gateways: string;
  /** The routing table the leading reconciler keeps (`--endpoints-bucket`). */
  endpoints: string;
  /** Projection snapshots the reconciler writes and the API and replay read (`--snapshot-bucket`). */
  snapshots: string;
  /** Revoked agent identities: the API writes them, gateways watch them. */
  revoked: string;
}

export const DEFAULT_BUCKETS: Buckets = {
  leases: "llmgw_leases",
  gateways: "llmgw-gateways",
  endpoints: "llmgw_endpoints",
  snapshots: "llmgw_snapshots",
  revoked: "llmgw_revoked",
};

/** The stream, subject prefix and buckets one deployment uses. */
export interface NatsLayout {
  stream: string;
  prefix: string;
  buckets: Buckets;
}

export const DEFAULT_LAYOUT: NatsLayout = {
  stream: DEFAULT_STREAM,
  prefix: DEFAULT_PREFIX,
  buckets: DEFAULT_BUCKETS,
};

export interface RolePermissions {
  publish: { allow: string[]; deny: string[] };
  subscribe: { allow: string[] };
}

/**
 * What reading one stream without a consumer takes: its info (with the
 * counts per subject: a bucket's keys), message gets (answered by the
 * stream leader) and direct gets, single or batched (`{"seq", "batch"}`,
 * `multi_last`).
 */
function getFromStream(stream: string): string[] {
  return [
    `$JS.API.STREAM.INFO.${stream}`,
    `$JS.API.STREAM.MSG.GET.${stream}`,
    `$JS.API.DIRECT.GET.${stream}`,
    `$JS.API.DIRECT.GET.${stream}.>`,
  ];
}

/**
 * What reading one stream in order takes: consumers on it, besides the
 * gets. NATS cannot tell a push consumer's create from a pull consumer's by
 * subject; a push consumer delivers only where someone subscribes, and every
 * role subscribes to `_INBOX.>` alone, so it can reach no stream's subject
 * (test/security/consumers.test.ts); the streams' `max_consumers` bound how
 * many there are.
 */
function readStream(stream: string): string[] {
  return [
    ...getFromStream(stream),
    `$JS.API.CONSUMER.CREATE.${stream}`,
    `$JS.API.CONSUMER.CREATE.${stream}.>`,
    `$JS.API.CONSUMER.INFO.${stream}.>`,
    `$JS.API.CONSUMER.DELETE.${stream}.>`,
    `$JS.API.CONSUMER.MSG.NEXT.${stream}.>`,
    `$JS.FC.${stream}.>`,
  ];
}

const kvStream = (bucket: string) => `KV_${bucket}`;
/** Watching a bucket (the gateways watch revocations, the reconcilers the gateways' leases): consumers on its stream. */
const readBucket = (bucket: string) => readStream(kvStream(bucket));
/** Keys and values of a bucket with no consumer at all (src/log/buckets.ts, `bucketKeys`). */
const getFromBucket = (bucket: string) => getFromStream(kvStream(bucket));
/** Creating a missing stream only: it cannot change or remove one that exists. */
const createStream = (stream: string) => `$JS.API.STREAM.CREATE.${stream}`;
/** Puts, creates, updates, deletes and purges of keys: all publishes to the key's subject. */
const writeBucket = (bucket: string) => `$KV.${bucket}.>`;

/** The Object Store stream of the log's archive (bucket `<stream>-archive`, src/log/archive). */
const archiveStream = (stream: string) => `OBJ_${stream}-archive`;

/**
 * Nobody removes the log, its messages or a bucket through these
 * credentials: that is an administrator's job. The archiver alone purges
 * the log, and only what it archived (its exceptions below).
 */
const NEVER = [
  "$JS.API.STREAM.DELETE.>",
  "$JS.API.STREAM.PURGE.>",
  "$JS.API.STREAM.MSG.DELETE.>",
  "$JS.API.STREAM.RESTORE.>",
  "$JS.API.CONSUMER.DURABLE.CREATE.>",
];

/** The permissions of `role` for one deployment's stream, prefix and buckets. */
export function rolePermissions(role: NatsRole, layout: NatsLayout = DEFAULT_LAYOUT): RolePermissions {
  const { stream, prefix: p, buckets: b } = layout;
  // Every reader of the log reads its archive too (reads cross into it transparently).
  const common = ["$JS.API.INFO", ...readStream(stream), ...readStream(archiveStream(stream))];
  /** The roles that only read: the log and its archive by direct gets, no consumer. */
  const getLog = ["$JS.API.INFO", ...getFromStream(stream), ...getFromStream(archiveStream(stream))];
  const allBuckets = [b.leases, b.gateways, b.endpoints, b.snapshots, b.revoked];
  // `llmgw logs` (src/engine-logs): the API asks, the gateways answer; core NATS, beside the log.
  const logs = new EngineLogSubjects(p);
  let subscribe = ["_INBOX.>"];
  let allow: string[];
  switch (role) {
    case "gateway":
      allow = [
        ...common,
        createStream(stream),
        `${p}.session.*`,
        `${p}.node.*`,
        `${p}.gateway.*`,
        ...readBucket(b.gateways),
        createStream(kvStream(b.gateways)),
        writeBucket(b.gateways),
        ...readBucket(b.revoked),
        createStream(kvStream(b.revoked)),
        logs.replies,
      ];
      subscribe = [...subscribe, logs.asks, logs.controls];
      break;
    case "reconciler":
      allow = [
        ...common,
        createStream(stream),
        `${p}.reconciler`,
        ...[b.leases, b.endpoints, b.snapshots].flatMap((x) => [
          ...readBucket(x),
          createStream(kvStream(x)),
          writeBucket(x),
        ]),
        ...readBucket(b.gateways),
      ];
      break;
    case "api":
      allow = [
        ...common,
        createStream(stream),
        // The API alone brings the settings of an existing log stream to its flags.
        `$JS.API.STREAM.UPDATE.${stream}`,
        `${p}.catalog`,
        `${p}.operator.*`,
        // Revocations, snapshots: read by key, never watched.
        ...allBuckets.flatMap(getFromBucket),
        createStream(kvStream(b.revoked)),
        writeBucket(b.revoked),
        logs.asks,
        logs.controls,
      ];
      subscribe = [...subscribe, logs.replies];
      break;
    case "reader":
      // The log and every bucket by gets only: no consumer, push or pull, anywhere.
      allow = [...getLog, ...allBuckets.flatMap(getFromBucket)];
      break;
    case "router":
      // The routing table and the log's load reports, by gets only; nothing else.
      allow = [...getLog, ...getFromBucket(b.endpoints)];
      break;
    case "archiver":
      allow = [
        ...common,
        createStream(stream),
        createStream(archiveStream(stream)),
        // Object Store writes: chunks and the metadata written last.
        `$O.${stream}-archive.>`,
        // Removing archived segments from the log (retention), and a failed put's chunks from the archive.
        `$JS.API.STREAM.PURGE.${stream}`,
        `$JS.API.STREAM.PURGE.${archiveStream(stream)}`,
      ];
      break;
    default: {
      const never: never = role;
      throw new Error(`unknown role ${String(never)}`);
    }
  }
  const deny = role === "archiver" ? NEVER.filter((d) => d !== "$JS.API.STREAM.PURGE.>") : [...NEVER];
  if (role !== "api") deny.push(`$JS.API.STREAM.UPDATE.>`);
  if (role === "archiver") deny.push(`${p}.>`, "$KV.>");
  // Engine output is asked for by the API alone and answered by gateways alone.
  if (role !== "api" && role !== "gateway") deny.push(logs.all);
  if (role === "reader" || role === "router") {
    // Denied outright too, so that no allow added later can grant them.
    deny.push(`$JS.API.STREAM.CREATE.>`, `${p}.>`, "$KV.>", "$JS.API.CONSUMER.>", "$JS.FC.>");
  }
  return { publish: { allow, deny }, subscribe: { allow: subscribe } };
}
