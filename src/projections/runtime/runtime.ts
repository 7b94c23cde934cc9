/**
 * The projection runtime: a thin I/O shell around a pure fold. It loads the
 * newest usable snapshot, catches up with the log through an ordered
 * consumer, then follows it live; it exposes the state, the last sequence it
 * has passed and `waitFor(seq)` so a writer can read its own writes.
 *
 * Folding is synchronous per event; listeners, waiters, metrics and snapshot
 * checks run once per batch (whatever arrived in one turn of the event loop),
 * so a catch-up over a million events does not pay them a million times.
 */
import { type Logger, pino } from "pino";
import type { Registry } from "prom-client";
import { isLogError, type Log, type LogError, type LogRecord, type RefusedEvent } from "../../log/index.js";
import type { Projection } from "../projection.js";
import { canonicalJson } from "../serialize.js";
import { loadNearestSnapshot } from "./archive-snapshots.js";
import { ProjectionError } from "./errors.js";
import { type ProjectionMetrics, projectionMetrics } from "./metrics.js";
import type { SnapshotMeta, SnapshotStore } from "./snapshot-store.js";

export interface ProjectionRuntimeOptions<S> {
  /** Where snapshots are loaded from and written to; false (the default when absent) disables them. */
  snapshots?: SnapshotStore<S> | false;
  /** Snapshot after this many events, or after this long with at least one new event. Default 10 000 / 60 s. */
  snapshotEvery?: { events: number; ms: number };
  logger?: Logger;
  /**
   * A message in the log that is not an event: "record" (default) counts it,
   * logs a warning with its sequence and goes on; "stop" fails the runtime.
   */
  onMalformed?: "stop" | "record";
  /** Registry for the runtime's Prometheus metrics; none when absent. */
  metrics?: Registry;
}

export type RuntimeStatus = "new" | "starting" | "running" | "failed" | "stopped";

interface Waiter {
  seq: number;
  resolve(): void;
  reject(err: Error): void;
}

const DEFAULT_SNAPSHOT_EVERY = { events: 10_000, ms: 60_000 };
const DEFAULT_WAIT_MS = 10_000;
const MAX_KEPT_MALFORMED = 100;

export class ProjectionRuntime<S> {
  readonly #log: Log;
  readonly #projection: Projection<S>;
  readonly #store: SnapshotStore<S> | undefined;
  readonly #every: { events: number; ms: number };
  readonly #logger: Logger;
  readonly #stopOnMalformed: boolean;
  readonly #metrics: ProjectionMetrics | undefined;
  readonly #labels: { projection: string };

  #status: RuntimeStatus = "new";
  #state: S | undefined;
  #seq = 0;
  #timeMs = 0;
  #folded = 0;
  #foldedUnreported = 0;
  #malformedCount = 0;
  #unknownKinds = 0;
  readonly #malformedSeqs: number[] = [];
  #refusedCount = 0;
  readonly #refusedSeqs: number[] = [];
  #restoredFrom: SnapshotMeta | undefined;
  #failure: Error | undefined;

  readonly #listeners = new Set<(seq: number) => void>();
  readonly #errorListeners = new Set<(err: Error) => void>();
  readonly #waiters = new Set<Waiter>();
  #catchUp: (Waiter & { target: number }) | undefined;
  readonly #abort = new AbortController();
  #loop: Promise<void> | undefined;
  #flushScheduled = false;

  #sinceSnapshot = 0;
  #lastSnapshotSeq = 0;
  #lastSnapshotAt = Date.now();
  #snapshotting: Promise<unknown> | undefined;
  #snapshotTimer: NodeJS.Timeout | undefined;

  constructor(log: Log, projection: Projection<S>, opts: ProjectionRuntimeOptions<S> = {}) {
    this.#log = log;
    this.#projection = projection;
    this.#store = opts.snapshots || undefined;
    this.#every = opts.snapshotEvery ?? DEFAULT_SNAPSHOT_EVERY;
    if (!(this.#every.events >= 1) || !(this.#every.ms >= 1)) {
      throw new RangeError(`snapshotEvery needs positive events and ms, got ${JSON.stringify(this.#every)}`);
    }
    this.#logger = (opts.logger ?? pino({ level: "silent" })).child({ projection: projection.name });
    this.#stopOnMalformed = opts.onMalformed === "stop";
    this.#metrics = opts.metrics ? projectionMetrics(opts.metrics) : undefined;
    this.#labels = { projection: projection.name };
  }

  /** The current state. Do not mutate it: the runtime folds into it in place. */
  get state(): S {
    if (this.#state === undefined) {
      throw new ProjectionError(
        "invalid-state",
        `projection ${this.#projection.name} is read before start()`,
      );
    }
    return this.#state;
  }

  /**
   * The last sequence passed: folded, refused (its subject may not carry its
   * kind), or (in "record" mode) recorded as malformed. 0 before anything.
   */
  get lastSeq(): number {
    return this.#seq;
  }
  /** Stream time of the last event folded (ms; 0 before anything). */
  get lastTimeMs(): number {
    return this.#timeMs;
  }
  get status(): RuntimeStatus {
    return this.#status;
  }
  /** Events folded by this runtime (not counting what a snapshot already covered). */
  get eventsFolded(): number {
    return this.#folded;
  }
  get malformedCount(): number {
    return this.#malformedCount;
  }

  /**
   * Events of a kind this version does not know (a newer version wrote
   * them), folded as no-ops: counted, logged at the first, never fatal
   * (docs/upgrades.md).
   */
  get unknownKindCount(): number {
    return this.#unknownKinds;
  }
  /** Sequences of malformed messages passed over (the first 100). */
  get malformedSeqs(): readonly number[] {
    return this.#malformedSeqs;
  }
  /** Events passed over because their subject may not carry their kind (src/log/subject-kinds.ts). */
  get refusedCount(): number {
    return this.#refusedCount;
  }
  /** Sequences of refused events (the first 100). */
  get refusedSeqs(): readonly number[] {
    return this.#refusedSeqs;
  }
  /** The snapshot the runtime started from, if any. */
  get restoredFrom(): SnapshotMeta | undefined {
    return this.#restoredFrom;
  }
  /** Why the runtime failed, when it did. */
  get failure(): Error | undefined {
    return this.#failure;
  }

  /**
   * Loads the newest compatible snapshot, folds the log up to the stream's
   * last sequence at the time of the call, then keeps following. Resolves
   * once caught up.
   */
  async start(): Promise<void> {
    if (this.#status !== "new") {
      throw new ProjectionError("invalid-state", `projection ${this.#projection.name} was already started`);
    }
    this.#status = "starting";
    try {
      const target = await this.#log.lastSeq();
      await this.#restore(target);
      const caughtUp = new Promise<void>((resolve, reject) => {
        this.#catchUp = { seq: target, target, resolve, reject };
      });
      this.#loop = this.#follow();
      this.#checkCaughtUp();
      if (this.#store) {
        this.#snapshotTimer = setInterval(() => this.#maybeSnapshot(), Math.min(this.#every.ms, 60_000));
        this.#snapshotTimer.unref();
      }
      await caughtUp;
      if (this.#status === "starting") this.#status = "running";
      this.#logger.info(
        { seq: this.#seq, folded: this.#folded, snapshotSeq: this.#restoredFrom?.seq ?? 0 },
        `caught up at sequence ${this.#seq}`,
      );
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  async #restore(target: number): Promise<void> {
    const p = this.#projection;
    try {
      // The archive's snapshots too: what the stream no longer holds is folded from the nearest.
      const snap = await loadNearestSnapshot(this.#log, p, this.#store, { maxSeq: target });
      if (snap) {
        this.#state = snap.state;
        this.#seq = snap.meta.seq;
        this.#timeMs = snap.meta.timeMs;
        this.#lastSnapshotSeq = snap.meta.seq;
        this.#restoredFrom = snap.meta;
        this.#logger.info({ seq: snap.meta.seq }, `restored from the snapshot at sequence ${snap.meta.seq}`);
        return;
      }
    } catch (err) {
      // Snapshots save time; without them the log still has everything.
      this.#logger.warn(
        { err: String(err) },
        `cannot load snapshots, folding from the start: ${String(err)}`,
      );
    }
    this.#state = p.initialState();
  }

  async #follow(): Promise<void> {
    const signal = this.#abort.signal;
    let backoffMs = 250;
    while (!signal.aborted) {
      try {
        for await (const batch of this.#log.readBatches({
          fromSeq: this.#seq + 1,
          follow: true,
          signal,
          onRefused: (r: RefusedEvent) => this.#recordRefused(r),
          ...(this.#stopOnMalformed ? {} : { onMalformed: (err: LogError) => this.#recordMalformed(err) }),
        })) {
          this.#applyBatch(batch);
          backoffMs = 250;
        }
        if (signal.aborted) break;
        this.#logger.warn({ seq: this.#seq }, `the log reader ended; following again after ${this.#seq}`);
      } catch (err) {
        if (signal.aborted) break;
        if (
          err instanceof ProjectionError ||
          isLogError(err, "malformed") ||
          (this.#status === "starting" && isLogError(err, "not-found", "incompatible-stream"))
        ) {
          this.#fail(err as Error);
          return;
        }
        this.#logger.warn(
          { seq: this.#seq, err: String(err) },
          `following the log failed after sequence ${this.#seq}; retrying in ${backoffMs} ms: ${String(err)}`,
        );
      }
      await sleep(backoffMs, signal);
      backoffMs = Math.min(backoffMs * 2, 5000);
    }
  }

  /**
   * Folds a batch. The loop keeps the state, sequence and counts in locals
   * and writes them back once (also when a fold throws): a catch-up folds a
   * million events, and per-event bookkeeping on the runtime is a visible
   * share of it.
   */
  #applyBatch(batch: readonly LogRecord[]): void {
    const projection = this.#projection;
    let state = this.#state as S;
    let seq = this.#seq;
    let timeMs = this.#timeMs;
    let folded = 0;
    let r: LogRecord | undefined;
    try {
      for (let i = 0; i < batch.length; i++) {
        r = batch[i] as LogRecord;
        // A re-read after a reconnect may start before what was already folded.
        if (r.seq <= seq) continue;
        if (r.event.body.case === undefined) this.#recordUnknownKind(r.seq);
        // The record is the event's meta (sequence and time): no object per event.
        state = projection.evolve(state, r.event, r);
        seq = r.seq;
        timeMs = r.timeMs;
        folded++;
      }
    } catch (err) {
      const at = r as LogRecord;
      throw new ProjectionError(
        "failed",
        `folding ${at.event.body.case ?? "an event"} at sequence ${at.seq} into ${projection.name} failed: ${(err as Error).message}`,
        { cause: err },
      );
    } finally {
      this.#state = state;
      this.#seq = seq;
      this.#timeMs = timeMs;
      this.#folded += folded;
      this.#foldedUnreported += folded;
      this.#sinceSnapshot += folded;
      if (folded > 0) this.#scheduleFlush();
    }
  }

  #recordUnknownKind(seq: number): void {
    this.#unknownKinds++;
    this.#metrics?.unknownKinds.inc(this.#labels);
    // The first says what to do; the count and the metric say how many more.
    if (this.#unknownKinds === 1)
      this.#logger.warn(
        { seq },
        `passing over an event of a kind this version does not know at sequence ${seq} (a newer llmgw wrote it); upgrade to fold it`,
      );
  }

  #recordMalformed(err: LogError): void {
    const seq = err.seq ?? this.#seq + 1;
    this.#malformedCount++;
    if (this.#malformedSeqs.length < MAX_KEPT_MALFORMED) this.#malformedSeqs.push(seq);
    this.#metrics?.malformed.inc(this.#labels);
    this.#logger.warn({ seq, err: err.message }, `passing over a malformed message at sequence ${seq}`);
    if (seq > this.#seq) this.#seq = seq;
    this.#scheduleFlush();
  }

  /** A forged or misplaced event: never folded, but passed (a writer waiting for its sequence is answered). */
  #recordRefused(r: RefusedEvent): void {
    if (r.seq <= this.#seq) return;
    this.#refusedCount++;
    if (this.#refusedSeqs.length < MAX_KEPT_MALFORMED) this.#refusedSeqs.push(r.seq);
    this.#metrics?.refused.inc({ ...this.#labels, kind: r.kind });
    this.#logger.warn(
      { seq: r.seq, subject: r.subject, kind: r.kind, eventId: r.event.id },
      `refused ${r.kind} at sequence ${r.seq} on ${r.subject}, not folded: ${r.reason}`,
    );
    this.#seq = r.seq;
    this.#scheduleFlush();
  }

  #scheduleFlush(): void {
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    setImmediate(() => this.#flush());
  }

  #flush(): void {
    this.#flushScheduled = false;
    if (this.#metrics) {
      this.#metrics.lastSeq.set(this.#labels, this.#seq);
      if (this.#foldedUnreported > 0) this.#metrics.eventsFolded.inc(this.#labels, this.#foldedUnreported);
      if (this.#timeMs > 0)
        this.#metrics.foldLag.set(this.#labels, Math.max(0, Date.now() - this.#timeMs) / 1000);
    }
    this.#foldedUnreported = 0;
    for (const w of this.#waiters) {
      if (w.seq <= this.#seq) w.resolve();
    }
    this.#checkCaughtUp();
    for (const l of this.#listeners) {
      try {
        l(this.#seq);
      } catch (err) {
        this.#logger.error({ err: String(err) }, `a change listener threw: ${String(err)}`);
      }
    }
    this.#maybeSnapshot();
  }

  #checkCaughtUp(): void {
    const c = this.#catchUp;
    if (c && this.#seq >= c.target) {
      this.#catchUp = undefined;
      c.resolve();
    }
  }

  #maybeSnapshot(): void {
    if (!this.#store || this.#snapshotting || this.#status === "failed" || this.#status === "stopped") return;
    const due =
      this.#sinceSnapshot >= this.#every.events ||
      (this.#seq > this.#lastSnapshotSeq && Date.now() - this.#lastSnapshotAt >= this.#every.ms);
    if (due) void this.#takeSnapshot();
  }

  async #takeSnapshot(): Promise<SnapshotMeta | undefined> {
    const store = this.#store;
    if (!store || this.#state === undefined || this.#seq === 0) return undefined;
    // Serialized now, while the state is exactly the fold up to #seq.
    const at = { seq: this.#seq, timeMs: this.#timeMs };
    const text = canonicalJson(this.#state);
    this.#sinceSnapshot = 0;
    this.#lastSnapshotAt = Date.now();
    const saving = store.save(this.#projection, at, text).then(
      (meta) => {
        this.#lastSnapshotSeq = Math.max(this.#lastSnapshotSeq, meta.seq);
        this.#metrics?.snapshots.inc({ ...this.#labels, result: "ok" });
        this.#logger.debug({ seq: meta.seq, bytes: meta.bytes }, `snapshot at sequence ${meta.seq}`);
        return meta;
      },
      (err) => {
        this.#metrics?.snapshots.inc({ ...this.#labels, result: "error" });
        this.#logger.warn(
          { seq: at.seq, err: String(err) },
          `snapshot at sequence ${at.seq} failed: ${String(err)}`,
        );
        return undefined;
      },
    );
    this.#snapshotting = saving;
    try {
      return await saving;
    } finally {
      this.#snapshotting = undefined;
      // Events folded while this one was written may have made the next one
      // due; the flushes that saw them skipped it, and none may follow.
      this.#maybeSnapshot();
    }
  }

  /**
   * Writes a snapshot of the current state now (when snapshots are on and
   * something was folded since the last one). Resolves with what was written.
   */
  async snapshotNow(): Promise<SnapshotMeta | undefined> {
    if (this.#snapshotting) await this.#snapshotting;
    if (this.#seq === this.#lastSnapshotSeq) return undefined;
    return this.#takeSnapshot();
  }

  /**
   * Resolves once the runtime has passed `seq` (read your own writes: append,
   * then wait for the ack's sequence). Rejects with a ProjectionError on
   * timeout (default 10 s), abort, stop or failure.
   */
  waitFor(seq: number, opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<void> {
    if (this.#seq >= seq) return Promise.resolve();
    if (this.#failure) return Promise.reject(this.#failedError());
    if (this.#status === "stopped") {
      return Promise.reject(new ProjectionError("stopped", `projection ${this.#projection.name} is stopped`));
    }
    const timeoutMs = opts.timeoutMs ?? DEFAULT_WAIT_MS;
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        opts.signal?.removeEventListener("abort", onAbort);
        this.#waiters.delete(w);
      };
      const w: Waiter = {
        seq,
        resolve: () => {
          done();
          resolve();
        },
        reject: (err) => {
          done();
          reject(err);
        },
      };
      const timer = setTimeout(
        () =>
          w.reject(
            new ProjectionError(
              "timeout",
              `projection ${this.#projection.name} did not reach sequence ${seq} within ${timeoutMs} ms (it is at ${this.#seq}, ${this.#status})`,
            ),
          ),
        timeoutMs,
      );
      const onAbort = () =>
        w.reject(
          new ProjectionError(
            "aborted",
            `waiting for sequence ${seq} of ${this.#projection.name} was aborted`,
          ),
        );
      if (opts.signal?.aborted) return onAbort();
      opts.signal?.addEventListener("abort", onAbort, { once: true });
      this.#waiters.add(w);
    });
  }

  /** Called with the last sequence after each folded batch. Returns the unsubscribe function. */
  onChange(listener: (seq: number) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Called once if the runtime fails (it then stops following). Returns the unsubscribe function. */
  onError(listener: (err: Error) => void): () => void {
    this.#errorListeners.add(listener);
    return () => this.#errorListeners.delete(listener);
  }

  #failedError(): ProjectionError {
    const f = this.#failure;
    return f instanceof ProjectionError
      ? f
      : new ProjectionError("failed", `projection ${this.#projection.name} failed: ${f?.message}`, {
          cause: f,
        });
  }

  #fail(err: Error): void {
    this.#failure = err;
    this.#status = "failed";
    this.#logger.error(
      { seq: this.#seq, err: err.message },
      `projection stopped following the log: ${err.message}`,
    );
    const e = this.#failedError();
    for (const w of [...this.#waiters]) w.reject(e);
    const c = this.#catchUp;
    this.#catchUp = undefined;
    c?.reject(e);
    for (const l of this.#errorListeners) {
      try {
        l(e);
      } catch {
        // A listener's failure must not hide the runtime's.
      }
    }
  }

  /** Stops following; pending waits reject with "stopped". The state stays readable. */
  async stop(): Promise<void> {
    if (this.#status === "stopped") return;
    this.#abort.abort();
    if (this.#snapshotTimer) clearInterval(this.#snapshotTimer);
    await this.#loop?.catch(() => {});
    if (this.#snapshotting) await this.#snapshotting;
    if (this.#status !== "failed") this.#status = "stopped";
    const e = new ProjectionError("stopped", `projection ${this.#projection.name} was stopped`);
    for (const w of [...this.#waiters]) w.reject(e);
    const c = this.#catchUp;
    this.#catchUp = undefined;
    c?.reject(e);
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
