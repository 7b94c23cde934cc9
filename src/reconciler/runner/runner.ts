/**
 * The reconciler's leader loop: a thin I/O shell around the pure `decide`.
 *
 * Two loops run side by side:
 * - the lease loop takes the lease when it is free, renews it well inside
 *   the TTL, and steps down when it cannot be sure it still holds it;
 * - the pass loop, only while leading, waits for a trigger (a new catalog
 *   at once, the fleet's events debounced), asks `decide`
 *   what to do with the projected state and appends the answer as one
 *   ReconcilePass, fenced by the log: the append expects the reconciler
 *   subject's last sequence to be the last pass this process's projection
 *   folded. Then it waits for its projection to fold the pass, so the next
 *   pass never acts on the same gap twice.
 *
 * Two independent guards keep a stale leader from acting: its own clock
 * (no append once the lease may have expired) and the log's fencing (an
 * append after someone else's pass is refused, and the leader steps down).
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { newEvent } from "../../codec/index.js";
import { type Event, Writer_Kind } from "../../gen/llmgw/v1/events_pb.js";
import { isLogError, type Log } from "../../log/index.js";
import type { FleetState } from "../../projections/index.js";
import { type PassBytesFit, passExpectation } from "../decide/index.js";
import { Backoff } from "./backoff.js";
import type { DecideFn, DecideResult, FollowedProjection, GatewaySet } from "./contract.js";
import type { EndpointsBucket } from "./endpoints-bucket.js";
import { type Lease, monotonicMs } from "./lease.js";
import type { RunnerMetrics } from "./metrics.js";
import { decideInput, passBody } from "./pass-body.js";
import { testPauseBeforeAppend } from "./test-pause.js";
import { DEFAULT_TRIGGER_OPTIONS, PassTriggers, type Trigger, type TriggerOptions } from "./triggers.js";

export interface RunnerOptions<C> {
  id: string;
  log: Log;
  projection: FollowedProjection<FleetState>;
  lease: Lease;
  gateways: GatewaySet;
  decide: DecideFn<C>;
  config: C;
  /**
   * Fits the config to the log's NATS server's max_payload (decide's
   * fitPassBytes): a pass is one message, and one the server refuses would
   * be decided again forever. Applied at start; none = the config as given.
   */
  fitToPayload?: (config: C, maxPayload: number | undefined) => PassBytesFit<C>;
  logger: Logger;
  metrics?: RunnerMetrics;
  /** The routing table's KV mirror, kept current while leading; none = not mirrored. */
  endpoints?: EndpointsBucket;
  triggers?: Partial<TriggerOptions>;
  /** Renew the lease this often; default a quarter of the TTL. */
  renewEveryMs?: number;
  /**
   * A follower tries to take the lease this often (and at once when the key
   * is deleted); default TTL/20, at most 500 ms. Expiry by max age emits no
   * watch event (the buckets have no subject delete markers; docs/RELIABILITY.md,
   * "Newer server features"), so this period (up to a fifth more with its
   * jitter) is what a killed leader costs on top of the TTL: at most 600 ms
   * and the first pass keep a takeover within TTL + 1 s, where a 1 s period
   * with its jitter and a pass did not always.
   */
  acquireEveryMs?: number;
  /** After stepping down on a conflict, wait this long before trying to lead again; default the TTL. */
  stepDownCooldownMs?: number;
  /** A whole pass (catch-up, decide, append, fold) must finish within this; default 10 s. */
  passTimeoutMs?: number;
  /** Backoff after a failed pass; default 250 ms doubling up to 10 s. */
  backoff?: { baseMs: number; maxMs: number };
}

export type RunnerRole = "follower" | "leader" | "stopped";

/** Why a pass appended nothing or what it appended. */
export type PassOutcome =
  | { kind: "appended"; seq: number; decisions: number; commands: number }
  | { kind: "nothing-to-do" }
  | { kind: "not-leading" };

export interface StepDown {
  reason: "fencing-conflict" | "lease-lost" | "lease-expired" | "shutdown";
  detail: string;
}

/** A pass that refused to append because its lease may be gone. */
class NotLeading extends Error {}

export class ReconcilerRunner<C> {
  readonly id: string;
  #role: RunnerRole = "follower";
  /** Bumped on every change of leadership: a pass of an older term never appends. */
  #term = 0;
  #needCatchUp = true;
  /** The endpoints bucket is rewritten from the folded table before the next pass. */
  #needEndpointsSync = true;
  #stopping = false;
  #cooldownUntil = 0;
  #leaseLoop: Promise<void> | undefined;
  #passLoop: Promise<void> | undefined;
  #wakeLease: (() => void) | undefined;
  #wakePassLoop: (() => void) | undefined;
  #leaseWatch: { stop(): void } | undefined;
  /** The catalog's sequence as last folded: a newer one is an operator's change, acted on at once. */
  #catalogSeq = 0;
  /** Set when the lease watch saw the key deleted or purged: the next acquisition is a handover. */
  #wokenByRelease = false;
  readonly #triggers: PassTriggers;
  readonly #backoff: Backoff;
  readonly #unsubscribe: Array<() => void> = [];
  readonly #stepDownListeners = new Set<(s: StepDown) => void>();
  readonly #log: Logger;
  /** The config decide gets: opts.config, fitted to the server at start. */
  #config: C;

  constructor(private readonly opts: RunnerOptions<C>) {
    this.id = opts.id;
    this.#log = opts.logger;
    this.#config = opts.config;
    this.#triggers = new PassTriggers({ ...DEFAULT_TRIGGER_OPTIONS, ...opts.triggers }, monotonicMs);
    this.#backoff = new Backoff(opts.backoff?.baseMs ?? 250, opts.backoff?.maxMs ?? 10_000);
  }

  get role(): RunnerRole {
    return this.#role;
  }

  /** True while this process leads and its lease is certainly valid. */
  get leading(): boolean {
    return this.#role === "leader" && this.opts.lease.valid;
  }

  onStepDown(fn: (s: StepDown) => void): () => void {
    this.#stepDownListeners.add(fn);
    return () => this.#stepDownListeners.delete(fn);
  }

  start(): void {
    const { projection, gateways, lease } = this.opts;
    this.#fitToPayload();
    this.opts.metrics?.observeReplicas(() => projection.state.replicas);
    this.#catalogSeq = projection.state.replicas.catalog.seq;
    this.#unsubscribe.push(
      projection.onChange((seq) => {
        this.opts.metrics?.observedSeq.set(seq);
        // A new catalog is what an operator asked for: a pass at once, not
        // after the debounce, which can run to maxDelayMs while agents keep
        // reporting. The fleet's own events are debounced into fewer passes.
        const catalogSeq = projection.state.replicas.catalog.seq;
        const catalogChanged = catalogSeq !== this.#catalogSeq;
        this.#catalogSeq = catalogSeq;
        if (this.#role !== "leader") return;
        if (catalogChanged) this.#triggers.request("catalog");
        else this.#triggers.events();
      }),
      gateways.onChange(() => {
        if (this.#role === "leader") this.#triggers.events();
      }),
    );
    void this.#watchLeaseKey(lease);
    this.#leaseLoop = this.#runLeaseLoop();
    this.#passLoop = this.#runPassLoop();
  }

  #fitToPayload(): void {
    if (!this.opts.fitToPayload) return;
    const maxPayload = this.opts.log.nc.info?.max_payload;
    const fit = this.opts.fitToPayload(this.opts.config, maxPayload);
    this.#config = fit.config;
    if (fit.lowered === null) return;
    this.#log.warn(
      { maxPassBytes: fit.lowered.to, configured: fit.lowered.from, natsMaxPayload: maxPayload },
      `pass limit lowered to ${fit.lowered.to} bytes: the NATS server takes messages of at most ${maxPayload} bytes, and a pass is one message`,
    );
  }

  /**
   * Stops acting at once, lets a pass in flight finish (it will not start
   * another append), then deletes the lease if still held so that a
   * successor need not wait for the TTL.
   */
  async stop(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    const wasLeader = this.#role === "leader";
    this.#term++;
    this.#triggers.close();
    this.#wakeLease?.();
    this.#wakePassLoop?.();
    this.#leaseWatch?.stop();
    for (const u of this.#unsubscribe) u();
    await Promise.allSettled([this.#passLoop, this.#leaseLoop]);
    this.#role = "stopped";
    this.opts.metrics?.isLeader.set(0);
    if (wasLeader) {
      try {
        const released = await this.opts.lease.release();
        this.opts.metrics?.leaseReleases.inc({ outcome: released ? "released" : "not-held" });
        this.#log.info({ released }, released ? "lease released" : "lease was no longer ours");
      } catch (err) {
        this.opts.metrics?.leaseReleases.inc({ outcome: "failed" });
        this.#log.warn({ err: String(err) }, "could not release the lease; it will expire");
      }
    } else {
      this.opts.lease.forget();
    }
  }

  // ------------------------------------------------------------ leadership

  async #runLeaseLoop(): Promise<void> {
    const { lease } = this.opts;
    const renewEvery = this.opts.renewEveryMs ?? Math.max(50, Math.floor(lease.ttlMs / 4));
    const acquireEvery =
      this.opts.acquireEveryMs ?? Math.max(50, Math.min(500, Math.floor(lease.ttlMs / 20)));
    while (!this.#stopping) {
      if (this.#role !== "leader") {
        const wait = this.#cooldownUntil - monotonicMs();
        if (wait > 0) {
          await this.#leaseSleep(wait);
          continue;
        }
        try {
          const after = this.#wokenByRelease ? "release" : "poll";
          this.#wokenByRelease = false;
          const r = await lease.acquire();
          if (r.ok && !this.#stopping) this.#becomeLeader(r.revision, after);
          else if (r.ok) await lease.release();
          else await this.#leaseSleep(jitter(acquireEvery));
        } catch (err) {
          this.#log.warn({ err: String(err) }, "could not try the lease; retrying");
          await this.#leaseSleep(jitter(acquireEvery));
        }
        continue;
      }
      // Leading: renew on schedule, sooner when validity runs short.
      await this.#leaseSleep(Math.min(renewEvery, Math.max(0, lease.remainingMs())));
      if (this.#stopping || this.#role !== "leader") continue;
      if (!lease.valid) {
        this.#stepDown({
          reason: "lease-expired",
          detail: "no successful renewal within the TTL minus the margin",
        });
        continue;
      }
      try {
        const r = await lease.renew(Math.max(50, Math.min(renewEvery, lease.remainingMs())));
        if (!r.ok)
          this.#stepDown({ reason: "lease-lost", detail: "the lease key moved on (expired and taken)" });
      } catch (err) {
        this.#log.warn(
          { err: String(err), remainingMs: Math.round(lease.remainingMs()) },
          "lease renewal failed; still certain of the lease for the remaining time",
        );
        await this.#leaseSleep(Math.min(renewEvery / 2, Math.max(0, lease.remainingMs())));
      }
    }
  }

  #becomeLeader(revision: number, after: "release" | "poll"): void {
    this.#term++;
    this.#role = "leader";
    this.#needCatchUp = true;
    this.#needEndpointsSync = true;
    this.#backoff.reset();
    this.#triggers.interrupt();
    this.#triggers.reset();
    this.#triggers.request("startup");
    this.opts.metrics?.isLeader.set(1);
    this.opts.metrics?.leaseAcquired.inc({ after });
    this.#log.info(
      { leaseRevision: revision, ttlMs: this.opts.lease.ttlMs, after },
      "leading: lease acquired",
    );
    this.#wakePassLoop?.();
  }

  #stepDown(s: StepDown): void {
    if (this.#role !== "leader") return;
    this.#term++;
    this.#role = "follower";
    this.#triggers.interrupt();
    this.#triggers.reset();
    this.opts.metrics?.isLeader.set(0);
    this.opts.metrics?.leaseLost.inc({ reason: s.reason });
    this.#log.warn({ reason: s.reason, detail: s.detail }, `stepping down: ${s.reason}`);
    if (s.reason === "fencing-conflict") {
      // Another writer holds the log position: give a rival the time to take
      // over, and free the lease at once if it is still ours.
      this.#cooldownUntil = monotonicMs() + (this.opts.stepDownCooldownMs ?? this.opts.lease.ttlMs);
      void this.opts.lease.release().catch((err) => {
        this.#log.warn({ err: String(err) }, "could not release the lease after a conflict; it will expire");
      });
    } else {
      this.opts.lease.forget();
    }
    for (const l of this.#stepDownListeners) l(s);
    this.#wakeLease?.();
  }

  #leaseSleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        resolve();
      }
      this.#wakeLease = done;
    });
  }

  /** A deleted lease key (a leader that left) wakes followers at once. */
  async #watchLeaseKey(lease: Lease): Promise<void> {
    while (!this.#stopping) {
      try {
        const w = await lease.kv.watch({ key: lease.key, include: "updates" });
        this.#leaseWatch = w;
        if (this.#stopping) w.stop();
        for await (const e of w) {
          if (e.operation !== "PUT" && this.#role !== "leader") {
            this.#wokenByRelease = true;
            this.#wakeLease?.();
          }
        }
      } catch (err) {
        if (this.#stopping) return;
        this.#log.debug({ err: String(err) }, "lease watch ended; watching again");
        await new Promise((r) => setTimeout(r, 500).unref());
      }
    }
  }

  // ---------------------------------------------------------------- passes

  /**
   * Gateways the log believes alive but the live set lacks are read directly
   * before a pass would expire their sessions: the set can lag the log (a
   * gateway that just started). When the read fails the set stands as it is.
   */
  async #confirmGateways(state: FleetState): Promise<void> {
    const gw = this.opts.gateways;
    if (!gw.confirm) return;
    const unsure = Object.values(state.inventory.gateways)
      .filter((g) => (g.status === "running" || g.status === "draining") && !gw.ids.has(g.gatewayId))
      .map((g) => g.gatewayId);
    if (unsure.length === 0) return;
    try {
      await gw.confirm(unsure);
    } catch (err) {
      this.opts.logger.warn(
        { gateways: unsure, err: String(err) },
        "could not read the leases of gateways missing from the live set; deciding with the set as it is",
      );
    }
  }

  async #runPassLoop(): Promise<void> {
    while (!this.#stopping) {
      if (this.#role !== "leader") {
        await new Promise<void>((resolve) => {
          this.#wakePassLoop = resolve;
        });
        continue;
      }
      const term = this.#term;
      const trigger = await this.#triggers.next();
      if (trigger === null || this.#stopping || term !== this.#term) continue;
      try {
        await this.runPass(trigger, term);
        this.#backoff.reset();
      } catch (err) {
        if (isLogError(err, "wrong-last-sequence")) {
          // Counted and logged even when this process stepped down meanwhile
          // (its lease expired while the append was on its way): the log
          // refused a stale pass, which is what an operator looks for.
          this.opts.metrics?.fencingConflicts.inc();
          this.#log.warn({ code: err.code, err: err.message }, "pass refused by the log: fencing conflict");
          if (term === this.#term) this.#stepDown({ reason: "fencing-conflict", detail: err.message });
          continue;
        }
        if (term !== this.#term) continue;
        if (err instanceof NotLeading) continue;
        this.#needCatchUp = true;
        this.#needEndpointsSync = true;
        const wait = this.#backoff.fail();
        this.opts.metrics?.passErrors.inc();
        this.#log.warn(
          { err: (err as Error).message, trigger, failures: this.#backoff.failures, retryInMs: wait },
          "pass failed; retrying",
        );
        this.#triggers.hold(wait);
        this.#triggers.request(trigger);
      }
    }
  }

  /** One pass. Exposed for tests; the pass loop is the only caller in production. */
  async runPass(trigger: Trigger, term = this.#term): Promise<PassOutcome> {
    const { projection, log, lease } = this.opts;
    const started = monotonicMs();
    const timeoutMs = this.opts.passTimeoutMs ?? 10_000;
    const left = () => Math.max(1, timeoutMs - (monotonicMs() - started));
    const current = () => term === this.#term && this.#role === "leader" && lease.valid;
    const end = this.opts.metrics?.passDuration.startTimer();

    if (!current()) return { kind: "not-leading" };
    if (this.#needCatchUp) {
      // Decide on the whole log as it is now: a new leader (or one whose last
      // append may or may not have landed) folds up to the end first.
      await projection.waitFor(await log.lastSeq(), { timeoutMs: left() });
      this.#needCatchUp = false;
    }
    if (!current()) return { kind: "not-leading" };

    if (this.#needEndpointsSync && this.opts.endpoints) {
      // A new leader (or one after a failed pass) makes the bucket equal to
      // the table the log records; this pass then writes what it changes.
      await this.opts.endpoints.sync(projection.state.replicas.endpoints);
      this.#needEndpointsSync = false;
      if (!current()) return { kind: "not-leading" };
    }

    // Before the state is taken: the await lets the projection fold on.
    await this.#confirmGateways(projection.state);
    if (!current()) return { kind: "not-leading" };
    const state = projection.state;
    const observedSeq = projection.lastSeq;
    const nowMs = Date.now();
    const out: DecideResult = this.opts.decide(
      decideInput(state, this.#config, nowMs, this.opts.gateways.ids),
    );
    const expect = passExpectation(state);
    this.#triggers.deadline(
      out.nextDeadlineMs === null
        ? null
        : Math.max(out.nextDeadlineMs, nowMs + (this.opts.triggers?.debounceMs ?? 100)),
    );
    if (out.decisions.length === 0 && out.commands.length === 0) {
      end?.({ outcome: "nothing-to-do" });
      return { kind: "nothing-to-do" };
    }

    const event = this.#passEvent(out, { observedSeq, nowMs, trigger });
    // The routing table first: a router hears that a replica drains before
    // the pass carrying its DrainShard exists for any gateway to relay.
    if (this.opts.endpoints) {
      if (!current()) throw new NotLeading();
      await this.opts.endpoints.publish(out.decisions);
    }
    // Checked again right before the append: the lease must still be
    // certain by our own clock, whatever happened during decide.
    if (!current()) throw new NotLeading();
    await testPauseBeforeAppend(this.#log);
    const appended = await log.append(event, { expectLastSubjectSeq: expect, timeoutMs: left() });
    this.#recordAppended(out, trigger);
    this.#log.info(
      {
        seq: appended.seq,
        trigger,
        observedSeq,
        decisions: out.decisions.length,
        commands: out.commands.length,
        truncated: out.truncated,
      },
      "pass appended",
    );
    await projection.waitFor(appended.seq, { timeoutMs: left() });
    if (out.truncated) this.#triggers.request("truncated");
    end?.({ outcome: "appended" });
    return {
      kind: "appended",
      seq: appended.seq,
      decisions: out.decisions.length,
      commands: out.commands.length,
    };
  }

  #passEvent(out: DecideResult, p: { observedSeq: number; nowMs: number; trigger: Trigger }): Event {
    return newEvent({
      id: `pass-${randomUUID()}`,
      timeUnixMs: BigInt(Date.now()),
      writer: { kind: Writer_Kind.RECONCILER, id: this.id },
      body: {
        case: "reconcilePass",
        value: passBody(out, {
          leaderId: this.id,
          leaseRevision: this.opts.lease.revision,
          observedSeq: p.observedSeq,
          nowMs: p.nowMs,
          trigger: p.trigger,
        }),
      },
    });
  }

  #recordAppended(out: DecideResult, trigger: Trigger): void {
    const m = this.opts.metrics;
    if (!m) return;
    m.passesAppended.inc({ trigger });
    for (const d of out.decisions) m.decisions.inc({ kind: d.kind.case ?? "unknown" });
    for (const c of out.commands) m.commands.inc({ action: c.action.case ?? "unknown" });
  }
}

function jitter(ms: number): number {
  return Math.round(ms * (0.8 + 0.4 * Math.random()));
}
