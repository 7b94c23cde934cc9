/**
 * The reconciler under simulation: candidates competing for one lease over
 * simulated time, the leader running passes with the real fold
 * (`evolveFleet`) and the real `decide`, fenced by `passExpectation` through
 * the real append path, as `llmgw reconciler` does (src/reconciler/runner).
 * A leader can pause (a GC pause, a stopped VM) between deciding and
 * appending, past its lease: by then another has the lease, and the log must
 * refuse the stale pass.
 */
import type { TimerHandle } from "../agent/client/index.js";
import { newEvent } from "../codec/index.js";
import { Writer_Kind } from "../gen/llmgw/v1/events_pb.js";
import type { LogAppender } from "../log/append.js";
import { evolveFleet, type FleetState, initialFleet } from "../projections/index.js";
import { decide, passExpectation, type ReconcilerConfig } from "../reconciler/decide/index.js";
import { defaultLeaseSafetyMarginMs } from "../reconciler/runner/lease-margin.js";
import { decideInput, passBody } from "../reconciler/runner/pass-body.js";
import type { MemoryLog } from "./memory-log.js";
import type { Scheduler } from "./scheduler.js";

/** The lease every candidate competes for (a KV key with a TTL, over simulated time). */
export class Lease {
  holder: string | undefined;
  revision = 0;
  expiresAt = 0;

  constructor(readonly ttlMs: number) {}

  /** `id` takes or keeps the lease at `now` (the KV's time); true when it holds it. */
  claim(id: string, now: number): boolean {
    if (this.holder === id && now < this.expiresAt) {
      this.expiresAt = now + this.ttlMs;
      return true;
    }
    if (this.holder !== undefined && now < this.expiresAt) return false;
    this.holder = id;
    this.revision++;
    this.expiresAt = now + this.ttlMs;
    return true;
  }
}

export interface SimReconcilerOptions {
  id: string;
  scheduler: Scheduler;
  log: MemoryLog;
  lease: Lease;
  config: ReconcilerConfig;
  /** Gateways whose lease is live now. */
  liveGateways: () => ReadonlySet<string>;
  newId: () => string;
  /** How often a candidate renews or claims the lease, and a leader looks for work. */
  tickMs: number;
  /** Told of each pass the log took. */
  onPass?: (seq: number, leaderId: string) => void;
}

export class SimReconciler {
  readonly id: string;
  up = true;
  /** Until when the process is frozen (a pause): it neither renews nor passes. */
  pausedUntil = 0;
  /** The next pass pauses between decide and append for this long (a leader-loss fault). */
  pauseBeforeAppendMs = 0;
  readonly #o: SimReconcilerOptions;
  #state: FleetState = initialFleet();
  #folded = 0;
  /** Leading since this lease revision (by its own view). */
  #leadingRevision = 0;
  #validUntil = 0;
  #nextDeadline: number | null = null;
  #lastObserved = -1;
  #appending = false;
  #timer: TimerHandle | undefined;

  /** This process's connection to the log (a new one after a restart). */
  #conn: LogAppender;

  constructor(opts: SimReconcilerOptions) {
    this.#o = opts;
    this.id = opts.id;
    this.#conn = opts.log.connection().appender;
  }

  start(): void {
    this.#timer = this.#o.scheduler.every(this.#o.tickMs, () => this.#tick());
  }

  get leading(): boolean {
    return this.#leadingRevision > 0 && this.#o.scheduler.now < this.#validUntil;
  }

  /** The process dies; `restart` brings a new one (it folds the log from the start). */
  crash(): void {
    this.up = false;
    this.#leadingRevision = 0;
    this.#o.scheduler.cancel(this.#timer);
  }

  restart(): void {
    this.up = true;
    this.#conn = this.#o.log.connection().appender;
    this.#state = initialFleet();
    this.#folded = 0;
    this.#lastObserved = -1;
    this.#appending = false;
    this.start();
  }

  #tick(): void {
    const s = this.#o.scheduler;
    if (!this.up || s.now < this.pausedUntil) return;
    const lease = this.#o.lease;
    if (lease.claim(this.id, s.now)) {
      if (this.#leadingRevision !== lease.revision) {
        this.#leadingRevision = lease.revision;
        this.#lastObserved = -1;
      }
      // Certain by its own clock for less than the TTL, by the runner's margin.
      this.#validUntil = s.now + lease.ttlMs - defaultLeaseSafetyMarginMs(lease.ttlMs);
    } else {
      this.#leadingRevision = 0;
    }
    if (this.leading && !this.#appending) this.#maybePass();
  }

  #fold(): void {
    const records = this.#o.log.records;
    for (; this.#folded < records.length; this.#folded++) {
      const r = records[this.#folded]!;
      this.#state = evolveFleet(this.#state, r.event, { seq: r.seq, timeMs: r.timeMs });
    }
  }

  #maybePass(): void {
    const s = this.#o.scheduler;
    this.#fold();
    const due = this.#nextDeadline !== null && s.now >= this.#nextDeadline;
    if (this.#state.seq === this.#lastObserved && !due) return;
    this.#lastObserved = this.#state.seq;
    const nowMs = s.now;
    const out = decide(decideInput(this.#state, this.#o.config, nowMs, this.#o.liveGateways()));
    this.#nextDeadline = out.nextDeadlineMs;
    if (out.decisions.length === 0 && out.commands.length === 0) return;
    const lease = this.#o.lease;
    const event = newEvent({
      id: `pass-${this.#o.newId()}`,
      timeUnixMs: BigInt(nowMs),
      writer: { kind: Writer_Kind.RECONCILER, id: this.id },
      body: {
        case: "reconcilePass",
        value: passBody(out, {
          leaderId: this.id,
          leaseRevision: lease.revision,
          observedSeq: this.#state.seq,
          nowMs,
          trigger: due ? "deadline" : "events",
        }),
      },
    });
    const expect = passExpectation(this.#state);
    const append = () => {
      this.#appending = true;
      this.#conn.appendWith(
        event,
        { expectLastSubjectSeq: expect, timeoutMs: 5000 },
        {
          appended: (a) => {
            this.#appending = false;
            this.#o.onPass?.(a.seq, this.id);
          },
          failed: () => {
            this.#appending = false;
            // The next pass decides again on the log as it is then.
            this.#lastObserved = -1;
          },
        },
      );
    };
    const pause = this.pauseBeforeAppendMs;
    if (pause > 0) {
      // Frozen after deciding, before appending: it wakes believing it still leads.
      this.pauseBeforeAppendMs = 0;
      this.pausedUntil = s.now + pause;
      this.#appending = true;
      s.after(pause, () => {
        if (this.up) append();
        else this.#appending = false;
      });
      return;
    }
    append();
  }
}
