/**
 * The set of gateways whose lease is alive: the keys present in the
 * gateways' KV bucket (one key per gateway id, kept alive by the gateway and
 * removed by the bucket's max age when it dies).
 *
 * A key removed by max age produces no watch event (the bucket has no
 * subject delete markers; docs/RELIABILITY.md, "Newer server features"), so
 * the set is re-listed periodically; a watch on the bucket makes additions
 * and explicit deletes visible at once.
 */
import { JetStreamApiCodes, JetStreamApiError, type JetStreamClient } from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import type { Logger } from "pino";

export interface LiveGatewaysOptions {
  bucket: string;
  /** Re-list the keys this often (catches expiries). Default 1000 ms. */
  pollMs?: number;
}

export class LiveGateways {
  #ids: ReadonlySet<string> = new Set();
  #loaded = false;
  #stopped = false;
  #timer: NodeJS.Timeout | undefined;
  #watch: { stop(): void } | undefined;
  readonly #listeners = new Set<() => void>();

  constructor(
    private readonly js: JetStreamClient,
    private readonly opts: LiveGatewaysOptions,
    private readonly log: Logger,
  ) {}

  /** The live gateway ids as of the last listing. */
  get ids(): ReadonlySet<string> {
    return this.#ids;
  }

  /** True once one listing completed (before that the set means nothing). */
  get loaded(): boolean {
    return this.#loaded;
  }

  /** Called whenever the set changes. */
  onChange(fn: () => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  async start(): Promise<void> {
    await this.refresh();
    this.#schedule();
    void this.#watchLoop();
  }

  /** Lists the bucket now. A missing bucket means no gateway has ever run: the set is empty. */
  async refresh(): Promise<void> {
    const kv = await this.#bucket();
    const next = new Set<string>();
    if (kv) {
      const keys = await kv.keys();
      for await (const k of keys) next.add(k);
      // A listing can miss a key that is being renewed at that moment (with one
      // revision kept, the old message is gone before the listing reaches it
      // and the new one arrives after it ended). Dropping a live gateway makes
      // the leader expire every session it holds, so a key is only dropped once
      // a direct read confirms it is gone. Ids known from the watch meanwhile
      // are checked the same way.
      for (const id of this.#ids) {
        if (next.has(id)) continue;
        const e = await kv.get(id);
        if (e && e.operation === "PUT") next.add(id);
      }
    }
    this.#set(next);
    this.#loaded = true;
  }

  /** Reads the leases of `ids` directly; adds those alive (a lease seen late by the watch or a listing). */
  async confirm(ids: readonly string[]): Promise<void> {
    const missing = ids.filter((id) => !this.#ids.has(id));
    if (missing.length === 0) return;
    const kv = await this.#bucket();
    if (!kv) return;
    const found: string[] = [];
    for (const id of missing) {
      const e = await kv.get(id);
      if (e && e.operation === "PUT") found.push(id);
    }
    if (found.length > 0) this.#set(new Set([...this.#ids, ...found]));
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#watch?.stop();
  }

  #set(next: Set<string>): void {
    const same = next.size === this.#ids.size && [...next].every((id) => this.#ids.has(id));
    if (same) return;
    this.log.info({ gateways: [...next].sort() }, "live gateways changed");
    this.#ids = next;
    for (const fn of this.#listeners) fn();
  }

  async #bucket(): Promise<KV | null> {
    const kv = await new Kvm(this.js).open(this.opts.bucket);
    try {
      await kv.status();
      return kv;
    } catch (err) {
      if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound) return null;
      throw err;
    }
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(async () => {
      try {
        await this.refresh();
      } catch (err) {
        this.log.warn({ err: String(err) }, "listing live gateways failed; keeping the last set");
      }
      this.#schedule();
    }, this.opts.pollMs ?? 1000);
    this.#timer.unref();
  }

  async #watchLoop(): Promise<void> {
    while (!this.#stopped) {
      try {
        const kv = await this.#bucket();
        if (!kv) {
          await sleep(this.opts.pollMs ?? 1000);
          continue;
        }
        const w = await kv.watch({ include: "updates" });
        this.#watch = w;
        if (this.#stopped) w.stop();
        for await (const e of w) {
          const next = new Set(this.#ids);
          if (e.operation === "PUT") next.add(e.key);
          else next.delete(e.key);
          this.#set(next);
        }
      } catch (err) {
        if (this.#stopped) return;
        this.log.warn({ err: String(err) }, "watching live gateways failed; retrying");
        await sleep(this.opts.pollMs ?? 1000);
      }
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms).unref());
}
