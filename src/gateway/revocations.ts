/**
 * The revocation bucket as this gateway applies it: every key, kept in
 * memory from a listing at start and a watch of the bucket's updates, so a
 * revocation reaches the gateway within moments and every registration is
 * checked without a round trip. Gateways only read the bucket; the API role
 * (`llmgw revoke`) writes it. A bucket that does not exist yet means nothing
 * is revoked: it is created when this gateway may create it, and otherwise
 * looked for again until it appears.
 *
 * It fails closed: until the bucket has been read (or found absent), and
 * again from a failed watch until it is read anew, the revocation state is
 * unknown (`known` false), and the gateway refuses new sessions. A value is
 * applied only when it parses and names its key's CN or serial.
 */
import { jetstream } from "@nats-io/jetstream";
import type { KV, KvEntry } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { openBucket } from "../log/index.js";
import { sleep } from "./process-clock.js";
import {
  cnKey,
  parseRevocationKey,
  type Revocation,
  readRevocationValue,
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

/** What the watch tells its gateway besides revocations. */
export interface RevocationWatchEvents {
  /** How many entries apply now. */
  onSize?: (size: number) => void;
  /** The revocation state became known (true) or unknown (false). */
  onKnown?: (known: boolean) => void;
  /** A value was not applied: it does not parse or does not name its key's CN or serial. */
  onIgnored?: () => void;
}

/** Default pause before a missing bucket or a broken watch is tried again. */
export const REVOCATION_RETRY_MS = 1_000;

export class RevocationWatch {
  readonly #entries = new Map<string, Revocation>();
  readonly #stop = new AbortController();
  #watch: { stop(): void } | undefined;
  /** Undefined until the first read ends either way: then the first change is logged too. */
  #known: boolean | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly opts: RevocationWatchOptions,
    private readonly logger: Logger,
    /** A key was revoked (new or rewritten): cut off what it names. */
    private readonly onRevoked: (hit: RevocationHit) => void,
    private readonly events: RevocationWatchEvents = {},
  ) {}

  /** Whether the revocations in force are known: the bucket was read (or is absent) and its watch is running. */
  get known(): boolean {
    return this.#known === true;
  }

  #setKnown(known: boolean, err?: unknown): void {
    if (known === this.#known) return;
    this.#known = known;
    this.events.onKnown?.(known);
    if (known) {
      this.logger.info(
        { bucket: this.opts.bucket },
        "revocation state known: new sessions are admitted again",
      );
    } else {
      this.logger.error(
        { err: String(err), bucket: this.opts.bucket },
        "revocation state unknown (the revocation bucket cannot be read): new sessions are refused (Unavailable) until it is read; open ones stay",
      );
    }
  }

  /** Resolves once the bucket was read once (or found absent: nothing is revoked yet), or could not be (then `known` is false). */
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
    const retryMs = this.opts.retryMs ?? REVOCATION_RETRY_MS;
    while (!this.#stop.signal.aborted) {
      try {
        const kv = await this.#bucket();
        if (!kv) {
          this.#replaceAll([]);
          this.#setKnown(true);
          if (!announced) loaded();
          announced = true;
          await sleep(retryMs, this.#stop.signal);
          continue;
        }
        const w = await kv.watch({ include: "updates" });
        this.#watch = w;
        if (this.#stop.signal.aborted) w.stop();
        // The listing after the watch started: nothing written in between is missed.
        const listed: KvEntry[] = [];
        const keys = await kv.keys();
        for await (const k of keys) {
          const e = await kv.get(k);
          if (e) listed.push(e);
        }
        this.#replaceAll(listed);
        this.#setKnown(true);
        if (!announced) loaded();
        announced = true;
        for await (const e of w) this.#apply(e);
        // A watch that ends by itself (not stopped) leaves the state unknown until read again.
        if (!this.#stop.signal.aborted) throw new Error("the watch of the revocation bucket ended");
      } catch (err) {
        if (this.#stop.signal.aborted) break;
        this.logger.warn(
          { err: String(err), bucket: this.opts.bucket },
          "reading the revocation bucket failed; retrying (revocations known so far still apply)",
        );
        this.#setKnown(false, err);
        if (!announced) loaded();
        announced = true;
        await sleep(retryMs, this.#stop.signal);
      }
    }
  }

  /** The bucket as listed: every entry applied, and keys no longer there lifted. */
  #replaceAll(listed: KvEntry[]): void {
    const seen = new Set(listed.map((e) => e.key));
    for (const key of [...this.#entries.keys()]) {
      if (!seen.has(key)) {
        this.#entries.delete(key);
        this.logger.info({ key }, "revocation lifted");
      }
    }
    for (const e of listed) this.#apply(e);
    this.events.onSize?.(this.#entries.size);
  }

  #apply(e: KvEntry): void {
    if (e.operation !== "PUT") {
      if (this.#entries.delete(e.key)) {
        this.logger.info({ key: e.key }, "revocation lifted");
        this.events.onSize?.(this.#entries.size);
      }
      return;
    }
    const target = parseRevocationKey(e.key);
    if (!target) {
      this.#ignore(e.key, "the key is not cn-<node id> or serial-<hex>");
      return;
    }
    let value: unknown;
    try {
      value = e.json();
    } catch {
      this.#ignore(e.key, "the value is not JSON");
      return;
    }
    const read = readRevocationValue(target, value);
    if (!read.ok) {
      this.#ignore(e.key, read.why);
      return;
    }
    const entry = read.entry;
    this.#entries.set(e.key, entry);
    this.events.onSize?.(this.#entries.size);
    this.logger.warn({ key: e.key, cn: entry.cn, reason: entry.reason, by: entry.by }, "identity revoked");
    this.onRevoked({ key: e.key, entry });
  }

  /** A value that is not applied; one that replaced a revocation of its key lifts it (the key holds no revocation now). */
  #ignore(key: string, why: string): void {
    const lifted = this.#entries.delete(key);
    if (lifted) this.events.onSize?.(this.#entries.size);
    this.events.onIgnored?.();
    this.logger.warn(
      { key, bucket: this.opts.bucket, why, lifted },
      "revocation entry not applied: its value must be JSON {cn, serial?, reason, revokedAtMs, by} naming the key's CN or serial (llmgw revoke writes it)",
    );
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
