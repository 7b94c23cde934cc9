/**
 * One seed, from start to verdict: the world runs on the scheduler one entry
 * at a time; after each (and the promise jobs it started), the invariants
 * are checked — check-log's rules over what the log stored (`LogChecker`,
 * the same code as `llmgw check-log`, fed each record as it is stored; its
 * verdict is read after every step that stored one, since no other step
 * can change it) and the simulation's own — and the first violation ends
 * the run with the step, the rule and the last events.
 */
import { LogChecker, type RuleName } from "../invariants/index.js";
import { isReady, readyCounts, resolveMinAvailable } from "../projections/index.js";
import { scheduleFaults } from "./faults.js";
import type { StoredRecord } from "./memory-log.js";
import type { SimulationOptions } from "./options.js";
import { eachTurn } from "./turn.js";
import { World } from "./world.js";

/** The simulation's own invariants, beside check-log's rules. */
export type SimInvariant =
  | "stale-leader-pass"
  | "shard-on-two-nodes"
  | "not-converged"
  | "below-disruption-budget";

export interface SeedFailure {
  seed: number;
  /** Scheduler entries run when it showed. */
  step: number;
  invariant: RuleName | SimInvariant;
  message: string;
  /** Simulated ms since the start. */
  atMs: number;
  /** The last stored events, oldest first. */
  lastEvents: StoredRecord[];
}

export interface SeedResult {
  seed: number;
  digest: string;
  /** Events the log stored. */
  events: number;
  steps: number;
  simulatedMs: number;
  passes: number;
  fenced: number;
  /** Retried publishes the log's message-id dedupe stored once (their first ack was lost). */
  duplicates: number;
  failure: SeedFailure | undefined;
}

/** How often (simulated) the invariants that look at the whole fleet are checked. */
const FLEET_CHECK_MS = 5_000;

export async function runSeed(options: SimulationOptions): Promise<SeedResult> {
  const world = new World(options);
  const checker = new LogChecker();
  const { scheduler, log } = world;
  const start = scheduler.now;
  const end = start + options.minutes * 60_000;
  const faultsEnd = Math.max(start, end - options.convergeMinutes * 60_000);
  let failure: SeedFailure | undefined;
  const fail = (invariant: SeedFailure["invariant"], message: string) => {
    failure ??= {
      seed: options.seed,
      step: scheduler.steps,
      invariant,
      message,
      atMs: scheduler.now - start,
      lastEvents: log.records.slice(-options.lastEvents),
    };
  };

  // Passes the log took, by lease revision: a pass of an older revision after a newer one is a stale leader's.
  let newestRevision = 0;
  world.onStored = (r) => {
    const body = r.event.body;
    // Ready replicas that this pass starts draining (a voluntary disruption), read before the fold.
    const drained =
      body.case === "reconcilePass"
        ? body.value.decisions.flatMap((d) => {
            const k = d.kind;
            if (k.case !== "replicaDrainStarted" && k.case !== "replicaFailed" && k.case !== "replicaRemoved")
              return [];
            const rep = checker.state.replicas.replicas.get(k.value.replicaId);
            if (!rep || !isReady(rep)) return [];
            // A ready replica the pass records as failed, or removes without a drain, was lost (its agent
            // came back without it), not taken: it counts as still ready.
            if (k.case !== "replicaDrainStarted") return [{ model: rep.model, swap: false, lost: true }];
            // Make-before-break: a ready replacement already serves the drained replica's slot.
            const next = rep.replacedBy ? checker.state.replicas.replicas.get(rep.replacedBy) : undefined;
            return [{ model: rep.model, swap: next !== undefined && isReady(next), lost: false }];
          })
        : [];
    const before = drained.some((d) => !d.lost) ? readyCounts(checker.state.replicas) : undefined;
    checker.observe(r);
    if (before) checkBudget(checker, before, drained, r.seq, fail);
    if (r.event.body.case === "reconcilePass") {
      const rev = Number(r.event.body.value.leaseRevision);
      if (rev < newestRevision)
        fail(
          "stale-leader-pass",
          `pass at ${r.seq} by ${r.event.body.value.leaderId} holds lease revision ${rev}, but a pass of revision ${newestRevision} was accepted before it: two leaders' passes both accepted`,
        );
      newestRevision = Math.max(newestRevision, rev);
    }
  };

  world.start();
  scheduleFaults(world, faultsEnd);
  let nextFleetCheck = start + FLEET_CHECK_MS;
  let ran = false;
  /** Records the checker had seen at the last check: its verdict moves only with what the log stores. */
  let checkedRecords = -1;
  await eachTurn(() => {
    if (ran) {
      // The entry before, and the promise jobs it started, are over: check.
      if (log.records.length !== checkedRecords && failure === undefined) {
        checkedRecords = log.records.length;
        if (checker.violationCount > 0) {
          const v = checker.violations()[0]!;
          fail(v.rule, v.message);
        }
      }
      if (scheduler.now >= nextFleetCheck) {
        nextFleetCheck = scheduler.now + FLEET_CHECK_MS;
        checkShardsOnce(world, fail);
      }
      if (failure) return false;
    }
    const fn = scheduler.next(end);
    if (fn === undefined) return false;
    fn();
    ran = true;
    return true;
  });
  if (!failure) {
    const all = checker.finish(log.records, { acked: world.acked });
    const v = all[0];
    if (v) fail(v.rule, v.message);
  }
  if (!failure) checkConverged(world, checker, fail);
  return {
    seed: options.seed,
    digest: log.digest.hex(),
    events: log.records.length,
    steps: scheduler.steps,
    simulatedMs: scheduler.now - start,
    passes: checker.passes,
    fenced: log.fenced,
    duplicates: log.duplicates,
    failure,
  };
}

/**
 * A pass that drains ready replicas (a voluntary disruption: a node drain,
 * a rollout, a GPU-fault move) leaves each model at least its disruption
 * budget (minAvailable) or, with none stated, as many ready as before
 * (make-before-break) or as desired. "As many as before" counts slots: a
 * replica drained for a replacement that is already ready (a swap) was
 * counted twice before the pass, once through each. A ready replica the
 * same pass records as failed or removes without a drain (its agent came
 * back without it) was lost, not taken, and counts as still ready, as in
 * check-log's rollout-below-ready.
 */
function checkBudget(
  checker: LogChecker,
  before: Record<string, { ready: number; desired: number }>,
  drained: ReadonlyArray<{ model: string; swap: boolean; lost: boolean }>,
  seq: number,
  fail: (i: SimInvariant, m: string) => void,
): void {
  const counts = readyCounts(checker.state.replicas);
  const swaps: Record<string, number> = {};
  const lost: Record<string, number> = {};
  for (const d of drained) {
    if (d.lost) lost[d.model] = (lost[d.model] ?? 0) + 1;
    else swaps[d.model] = (swaps[d.model] ?? 0) + (d.swap ? 1 : 0);
  }
  for (const model of Object.keys(swaps)) {
    const b = before[model];
    const c = counts[model];
    const a = c && { ready: c.ready + (lost[model] ?? 0), desired: c.desired };
    if (!b || !a || a.ready >= b.ready) continue;
    const spec = checker.state.replicas.catalog.models.find((m) => m.name === model);
    const stated = spec?.minAvailable;
    const floor =
      stated === undefined
        ? Math.min(b.ready - (swaps[model] ?? 0), a.desired)
        : resolveMinAvailable(stated, a.desired);
    if (a.ready < floor)
      fail(
        "below-disruption-budget",
        `the pass at ${seq} drained ready replicas of ${model}: ${b.ready} → ${a.ready} ready, below ${stated === undefined ? `${floor} (no minAvailable: make-before-break)` : `minAvailable ${stated} = ${floor}`}`,
      );
  }
}

/** No shard runs (or starts, or drains) on two live nodes at once: the engines themselves, not the log. */
function checkShardsOnce(world: World, fail: (i: SimInvariant, m: string) => void): void {
  const where = new Map<string, string>();
  let found = false;
  for (const n of world.nodes) {
    n.forEachShardState((shardId, state) => {
      if (found || (state !== "starting" && state !== "running" && state !== "draining")) return;
      const other = where.get(shardId);
      if (other !== undefined && other !== n.nodeId) {
        fail("shard-on-two-nodes", `shard ${shardId} runs on ${other} and ${n.nodeId} at once`);
        found = true;
        return;
      }
      where.set(shardId, n.nodeId);
    });
    if (found) return;
  }
}

/** Once faults stopped, the fleet serves the catalog: every model has its desired replicas ready. */
function checkConverged(world: World, checker: LogChecker, fail: (i: SimInvariant, m: string) => void): void {
  const counts = readyCounts(checker.state.replicas);
  const short = Object.entries(counts).filter(([, c]) => c.ready < c.desired);
  if (short.length === 0) return;
  const what = short.map(([m, c]) => `${m} ${c.ready}/${c.desired} ready`).join(", ");
  fail(
    "not-converged",
    `${world.options.convergeMinutes} simulated minutes after the last fault the fleet does not serve the catalog: ${what}`,
  );
}
