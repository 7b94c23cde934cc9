/**
 * Leadership through one key in a KV bucket whose max age is the lease TTL.
 *
 * Every lease of a bucket has the same TTL, so the bucket's max age is the
 * TTL (no per-message TTL, which needs nats-server 2.11; docs/RELIABILITY.md,
 * "Newer server features"): every write of the key (create or renewal) lives
 * that long, and an unrenewed key simply disappears. The holder keeps it alive with updates
 * conditioned on the revision it holds, so two processes can never both
 * believe a renewal succeeded.
 *
 * Safety does not depend on the server telling the holder it lost: the
 * holder measures validity with its own monotonic clock from the moment it
 * *sent* its last successful write. The server stores that write later than
 * the send, so the key cannot expire (and be taken by someone else) before
 * `sentAt + TTL`. The holder stops acting at `sentAt + TTL - margin`.
 */
import { performance } from "node:perf_hooks";
import { JetStreamApiCodes, JetStreamApiError, type JetStreamClient } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { openBucket } from "../../log/index.js";
import { defaultLeaseSafetyMarginMs } from "./lease-margin.js";

export interface LeaseOptions {
  bucket: string;
  key: string;
  /** Who holds it (stored in the value, for operators and tests). */
  holderId: string;
  /** Max age of the bucket when this process creates it. An existing bucket's own max age wins. */
  ttlMs: number;
  /** Stop acting this long before the lease could expire; default TTL/5 (`defaultLeaseSafetyMarginMs`). */
  safetyMarginMs?: number;
  /** Replicas of the bucket's stream when this process creates it. */
  replicas?: number;
}

export type LeaseWrite = { ok: true; revision: number } | { ok: false; reason: "taken" | "lost" };

/** What the lease key holds. */
export interface LeaseValue {
  holder: string;
  ttlMs: number;
}

/** Monotonic milliseconds: never jumps with the wall clock. */
export function monotonicMs(): number {
  return performance.now();
}

export class Lease {
  #revision = 0;
  #validUntil = Number.NEGATIVE_INFINITY;

  private constructor(
    readonly kv: KV,
    readonly key: string,
    readonly holderId: string,
    /** The TTL actually in force (the bucket's max age). */
    readonly ttlMs: number,
    readonly safetyMarginMs: number,
  ) {}

  /** Opens (creating if needed) the lease bucket and reads the TTL actually in force. */
  static async open(js: JetStreamClient, opts: LeaseOptions): Promise<Lease> {
    // Puts and deletes only (src/log/buckets.ts). One that exists with other settings (another TTL or replicas) is used as it is.
    const kv: KV = await openBucket(js, opts.bucket, {
      ttlMs: opts.ttlMs,
      history: 1,
      replicas: opts.replicas ?? 1,
    });
    const status = await kv.status();
    const ttlMs = status.ttl;
    if (!(ttlMs > 0)) {
      throw new Error(
        `KV bucket ${opts.bucket} has no max age, so a lease in it would never expire; use another bucket`,
      );
    }
    const margin = opts.safetyMarginMs ?? defaultLeaseSafetyMarginMs(ttlMs);
    if (margin >= ttlMs)
      throw new Error(`lease safety margin ${margin} ms must be below the TTL ${ttlMs} ms`);
    return new Lease(kv, opts.key, opts.holderId, ttlMs, margin);
  }

  /** The revision of the key this process wrote last (0 when it holds nothing). */
  get revision(): number {
    return this.#revision;
  }

  /** True while the lease is certainly still ours by our own clock. */
  get valid(): boolean {
    return this.#revision > 0 && monotonicMs() < this.#validUntil;
  }

  /** Milliseconds of certain validity left (≤ 0 when none). */
  remainingMs(): number {
    return this.#revision > 0 ? this.#validUntil - monotonicMs() : 0;
  }

  #value(): Uint8Array {
    const v: LeaseValue = { holder: this.holderId, ttlMs: this.ttlMs };
    return new TextEncoder().encode(JSON.stringify(v));
  }

  #granted(revision: number, sentAt: number): LeaseWrite {
    this.#revision = revision;
    this.#validUntil = sentAt + this.ttlMs - this.safetyMarginMs;
    return { ok: true, revision };
  }

  /** Takes the lease if nobody holds it. `taken`: someone does. Other errors throw. */
  async acquire(): Promise<LeaseWrite> {
    const sentAt = monotonicMs();
    try {
      return this.#granted(await this.kv.create(this.key, this.#value()), sentAt);
    } catch (err) {
      if (isWrongLastSequence(err)) return { ok: false, reason: "taken" };
      throw err;
    }
  }

  /**
   * Renews the lease held at `revision`. `lost`: the key moved on (expired
   * and taken, or deleted). A timeout throws and leaves validity as it was:
   * the holder keeps acting only until its clock says the lease may be gone.
   */
  async renew(timeoutMs: number): Promise<LeaseWrite> {
    if (this.#revision === 0) return { ok: false, reason: "lost" };
    const sentAt = monotonicMs();
    try {
      return this.#granted(await this.kv.update(this.key, this.#value(), this.#revision, timeoutMs), sentAt);
    } catch (err) {
      if (isWrongLastSequence(err)) {
        this.forget();
        return { ok: false, reason: "lost" };
      }
      throw err;
    }
  }

  /** Stops considering the lease ours, without touching the key. */
  forget(): void {
    this.#revision = 0;
    this.#validUntil = Number.NEGATIVE_INFINITY;
  }

  /**
   * Deletes the key if it is still at the revision we wrote, so a successor
   * need not wait for the TTL. Never deletes a lease someone else holds.
   */
  async release(): Promise<boolean> {
    const rev = this.#revision;
    this.forget();
    if (rev === 0) return false;
    try {
      await this.kv.delete(this.key, { previousSeq: rev });
      return true;
    } catch (err) {
      if (isWrongLastSequence(err)) return false;
      throw err;
    }
  }

  /** Who holds the lease now according to the bucket, or null. */
  async holder(): Promise<{ holder: string; revision: number } | null> {
    const e = await this.kv.get(this.key);
    if (e?.operation !== "PUT") return null;
    try {
      const v = JSON.parse(new TextDecoder().decode(e.value)) as Partial<LeaseValue>;
      return { holder: String(v.holder ?? ""), revision: e.revision };
    } catch {
      return { holder: "", revision: e.revision };
    }
  }
}

function isWrongLastSequence(err: unknown): boolean {
  return (
    err instanceof JetStreamApiError &&
    (err.code === JetStreamApiCodes.StreamWrongLastSequence ||
      err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
  );
}
