import { jetstream } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { logErrorFrom, openBucket } from "../log/index.js";

/** What a gateway's lease says about it. */
export interface LeaseInfo {
  gatewayId: string;
  listen: string;
  version: string;
  startedAtMs: number;
}

/**
 * A gateway's lease: a key in a KV bucket whose entries expire after the
 * TTL, renewed at a third of it. A gateway that dies without a word is
 * noticed when its key expires; the reconciler then records its sessions as
 * closed.
 */
export class GatewayLease {
  #timer: NodeJS.Timeout | undefined;
  #failures = 0;

  private constructor(
    private readonly kv: KV,
    private readonly key: string,
    private readonly info: LeaseInfo,
    private readonly ttlMs: number,
    private readonly logger: Logger,
  ) {}

  static async acquire(
    nc: NatsConnection,
    opts: { bucket: string; ttlMs: number; info: LeaseInfo; logger: Logger; replicas?: number },
  ): Promise<GatewayLease> {
    let kv: KV;
    try {
      // Puts and deletes only: a bucket that refuses rollups and purges (src/log/buckets.ts).
      kv = await openBucket(jetstream(nc), opts.bucket, {
        ttlMs: opts.ttlMs,
        history: 1,
        replicas: opts.replicas ?? 1,
        warn: (m) => opts.logger.warn(m),
      });
    } catch (err) {
      throw logErrorFrom(err, `opening the lease bucket ${opts.bucket}`);
    }
    const key = opts.info.gatewayId;
    const lease = new GatewayLease(kv, key, opts.info, opts.ttlMs, opts.logger);
    try {
      const prev = await kv.get(key);
      if (prev && prev.operation === "PUT") {
        opts.logger.warn(
          { gateway: key, previous: prev.string() },
          "a live lease for this gateway id exists (a restart within the TTL, or another gateway with the same id)",
        );
      }
      await lease.#put();
    } catch (err) {
      throw logErrorFrom(err, `taking the lease ${opts.bucket}/${key}`);
    }
    lease.#timer = setInterval(() => void lease.#renew(), Math.max(250, Math.floor(opts.ttlMs / 3)));
    lease.#timer.unref();
    return lease;
  }

  async #put(): Promise<void> {
    await this.kv.put(this.key, JSON.stringify({ ...this.info, renewedAtMs: Date.now(), ttlMs: this.ttlMs }));
  }

  async #renew(): Promise<void> {
    try {
      await this.#put();
      if (this.#failures > 0) this.logger.info({ failures: this.#failures }, "lease renewed again");
      this.#failures = 0;
    } catch (err) {
      this.#failures++;
      this.logger.warn({ err: (err as Error).message, failures: this.#failures }, "lease renewal failed");
    }
  }

  /** Stops renewing and removes the key: the gateway left on purpose. */
  async release(): Promise<void> {
    clearInterval(this.#timer);
    try {
      await this.kv.delete(this.key);
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, "lease not released; it will expire");
    }
  }
}
