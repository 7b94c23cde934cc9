/**
 * The routing table mirrored into a NATS KV bucket for the data plane: one
 * key per model, its value the JSON list of the model's ready endpoints
 * (`[{"replicaId","url","nodeId"}]`, sorted by replica id). A model with no
 * ready endpoint has no key: a router watching the key sees it deleted.
 *
 * Only the leading reconciler writes it, and it writes a pass's changes
 * before it appends the pass, so a watcher learns that a replica drains
 * before any gateway relays the DrainShard (gateways relay only what they
 * read from the log). A leader that fails to append after writing leaves
 * the bucket ahead of the log; the next pass (or the next leader's sync)
 * writes it again from the log.
 */
import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import type { Decision } from "../../gen/llmgw/v1/events_pb.js";
import { bucketKeys, openBucket } from "../../log/index.js";
import type { EndpointEntry } from "../../projections/index.js";

export const DEFAULT_ENDPOINTS_BUCKET = "llmgw_endpoints";

/** A model name that is a valid KV key stays as it is. */
const PLAIN_KEY = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;

/**
 * The key of a model. Catalog names are letters, digits, '.', '_' and '-';
 * one with a dot where a KV key cannot have one (at the end, or two in a
 * row) becomes "=" and its base64url: no model name starts with "=", so the
 * two forms never meet and both decode back.
 */
export function endpointsKey(model: string): string {
  return PLAIN_KEY.test(model) ? model : `=${Buffer.from(model, "utf8").toString("base64url")}`;
}

/** The model a key names (the inverse of endpointsKey). */
export function modelOfEndpointsKey(key: string): string {
  return key.startsWith("=") ? Buffer.from(key.slice(1), "base64url").toString("utf8") : key;
}

export class EndpointsBucket {
  private constructor(
    readonly kv: KV,
    private readonly jsm: JetStreamManager,
    private readonly bucket: string,
  ) {}

  /** Opens the bucket, creating it (one value per key, no expiry) when it does not exist. */
  static async open(
    js: JetStreamClient,
    opts: { bucket: string; replicas?: number },
  ): Promise<EndpointsBucket> {
    // Puts and deletes only: a bucket that refuses rollups and purges (src/log/buckets.ts).
    const kv = await openBucket(js, opts.bucket, { history: 1, replicas: opts.replicas ?? 1 });
    return new EndpointsBucket(kv, await js.jetstreamManager(), opts.bucket);
  }

  /** The models' keys holding a table, listed with no consumer (a reader may read the bucket: src/log/buckets.ts). */
  #keys(): Promise<string[]> {
    return bucketKeys(this.kv, this.jsm, this.bucket);
  }

  /** Writes the tables a pass's EndpointsChanged decisions state. */
  async publish(decisions: readonly Decision[]): Promise<void> {
    for (const d of decisions) {
      if (d.kind.case !== "endpointsChanged") continue;
      const v = d.kind.value;
      await this.#write(
        v.model,
        v.endpoints.map((e) => ({ replicaId: e.replicaId, url: e.url, nodeId: e.nodeId })),
      );
    }
  }

  /** Makes the bucket equal to a whole table: every listed model written, every other key deleted. */
  async sync(table: Readonly<Record<string, readonly EndpointEntry[]>>): Promise<void> {
    const keep = new Set(Object.keys(table).map(endpointsKey));
    const stale: string[] = [];
    for (const key of await this.#keys()) if (!keep.has(key)) stale.push(key);
    for (const key of stale) await this.kv.delete(key);
    for (const [model, list] of Object.entries(table)) await this.#write(model, list);
  }

  /** The bucket's content, by model (tests and tools). */
  async read(): Promise<Record<string, EndpointEntry[]>> {
    const out: Record<string, EndpointEntry[]> = {};
    for (const key of await this.#keys()) {
      const e = await this.kv.get(key);
      if (e && e.operation === "PUT") out[modelOfEndpointsKey(key)] = e.json<EndpointEntry[]>();
    }
    return out;
  }

  async #write(model: string, list: readonly EndpointEntry[]): Promise<void> {
    const key = endpointsKey(model);
    if (list.length === 0) await this.kv.delete(key);
    else await this.kv.put(key, JSON.stringify(list));
  }
}
