/**
 * The revocation bucket as this gateway applies it: every key, kept in
 * memory from a listing at start and a watch of the bucket's updates, so a
 * revocation reaches the gateway within moments and every registration is
 * checked without a round trip. Gateways only read the bucket; the API role
 * (`llmgw revoke`) writes it. A bucket that does not exist yet means nothing
 * is revoked: it is created when this gateway may create it, and otherwise
 * looked for again until it appears.
 */
import { jetstream } from "@nats-io/jetstream";
import type { KV, KvEntry } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { openBucket } from "../log/index.js";
import { sleep } from "./publisher.js";
import {
  cnKey,
  parseRevocationKey,
  type Revocation,
  RevocationSchema,
  serialKey,
} from "./revocation-keys.js";

export interface RevocationHit {
  key: string;
  /** What the operator said when revoking, as far as it could be read. */
  entry: Revocation;
}

export interface RevocationWatchOptions {
  bucket: string;
  replicas: number;
  /** Retry a missing bucket or a broken watch this often. */
  retryMs?: number;
}

export class RevocationWatch {
  readonly #entries = new Map<string, Revocation>();
  readonly #stop = new AbortController();
  #watch: { stop(): void } | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly opts: RevocationWatchOptions,
    private readonly logger: Logger,
    /** A key was revoked (new or rewritten): cut off what it names. */
    private readonly onRevoked: (hit: RevocationHit) => void,
    private readonly onSize: (size: number) => void = () => {},
  ) {}

  /** Resolves once the bucket was read once (or found absent: nothing is revoked yet). */
  start(): Promise<void> {
    let loaded!: () => void;
    const ready = new Promise<void>((resolve) => {
      loaded = resolve;
    });
    void this.#run(loaded);
    return ready;
  }

  /** Stops watching; the loop ends at its next step. */
  stop(): void {
    this.#stop.abort();
    this.#watch?.stop();
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The revocation that keeps out node `nodeId`'s certificate with `serial`, if any. */
  find(nodeId: string, serial: string | undefined): RevocationHit | undefined {
    const keys = [cnKey(nodeId)];
    if (serial) {
      try {
        keys.push(serialKey(serial));
      } catch {
        // A serial that is not hex cannot have been revoked by serial.
      }
    }
    for (const key of keys) {
      const entry = this.#entries.get(key);
      if (entry) return { key, entry };
    }
    return undefined;
  }

  async #run(loaded: () => void): Promise<void> {
    let announced = false;
    const retryMs = this.opts.retryMs ?? 1_000;
    while (!this.#stop.signal.aborted) {
      try {
        const kv = await this.#bucket();
        if (!kv) {
          if (!announced) loaded();
          announced = true;
          await sleep(retryMs, this.#stop.signal);
          continue;
        }
        const w = await kv.watch({ include: "updates" });
        this.#watch = w;
        if (this.#stop.signal.aborted) w.stop();
        // The listing after the watch started: nothing written in between is missed.
        const keys = await kv.keys();
        for await (const k of keys) {
          const e = await kv.get(k);
          if (e) this.#apply(e);
        }
        if (!announced) loaded();
        announced = true;
        for await (const e of w) this.#apply(e);
      } catch (err) {
        if (this.#stop.signal.aborted) break;
        this.logger.warn(
          { err: String(err), bucket: this.opts.bucket },
          "reading the revocation bucket failed; retrying (revocations known so far still apply)",
        );
        if (!announced) loaded();
        announced = true;
        await sleep(retryMs, this.#stop.signal);
      }
    }
  }

  #apply(e: KvEntry): void {
    if (e.operation !== "PUT") {
      if (this.#entries.delete(e.key)) {
        this.logger.info({ key: e.key }, "revocation lifted");
        this.onSize(this.#entries.size);
      }
      return;
    }
    const target = parseRevocationKey(e.key);
    if (!target) {
      this.logger.warn({ key: e.key, bucket: this.opts.bucket }, "revocation key not understood; ignored");
      return;
    }
    const entry = this.#entry(e, target);
    this.#entries.set(e.key, entry);
    this.onSize(this.#entries.size);
    this.logger.warn({ key: e.key, cn: entry.cn, reason: entry.reason, by: entry.by }, "identity revoked");
    this.onRevoked({ key: e.key, entry });
  }

  /** The key decides what is revoked; an unreadable value still revokes it, with no reason. */
  #entry(e: KvEntry, target: NonNullable<ReturnType<typeof parseRevocationKey>>): Revocation {
    try {
      const parsed = RevocationSchema.safeParse(e.json());
      if (parsed.success) return parsed.data;
    } catch {
      // Not JSON: fall through.
    }
    return {
      cn: target.kind === "cn" ? target.cn : "",
      ...(target.kind === "serial" ? { serial: target.serial } : {}),
      reason: "",
      revokedAtMs: e.created.getTime(),
      by: "",
    };
  }

  async #bucket(): Promise<KV | null> {
    try {
      return await revocationBucket(this.nc, this.opts.bucket, this.opts.replicas, (m) =>
        this.logger.warn(m),
      );
    } catch (err) {
      if (!(err instanceof RevocationBucketMissing)) throw err;
      // Without the right to create it (a gateway's credentials only read it): nothing is revoked yet.
      this.logger.debug({ err: String(err.cause) }, "revocation bucket absent and not created here");
      return null;
    }
  }
}

/** The bucket does not exist and could not be created (`cause`: why). */
export class RevocationBucketMissing extends Error {
  override readonly name = "RevocationBucketMissing";
}

/**
 * Opens the revocation bucket, creating it when absent (five revisions per
 * key: who revoked and lifted what, and when, stays readable for a while).
 */
export async function revocationBucket(
  nc: NatsConnection,
  bucket: string,
  replicas: number,
  warn?: (message: string) => void,
): Promise<KV> {
  const js = jetstream(nc);
  // Puts and deletes only: a bucket that refuses rollups and purges (src/log/buckets.ts).
  const opts = { history: 5, replicas, ...(warn ? { warn } : {}) };
  const kv = await openBucket(js, bucket, { ...opts, create: false });
  if (kv) return kv;
  try {
    return await openBucket(js, bucket, opts);
  } catch (err) {
    throw new RevocationBucketMissing(`the KV bucket ${bucket} does not exist and cannot be created here`, {
      cause: err,
    });
  }
}
