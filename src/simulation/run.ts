/**
 * One seed, from start to verdict: the world runs on the scheduler one entry
 * at a time; after each (and the promise jobs it started), the invariants
 * are checked — check-log's rules over what the log stored (`LogChecker`,
 * the same code as `llmgw check-log`, fed each record as it is stored; its
 * verdict is read after every step that stored one, since no other step
 * can change it; the disruption budget and the lease order among them)
 * and the simulation's own (no shard on two live nodes, convergence) —
 * and the first violation ends the run with the step, the rule and the
 * last events.
 */
import { LogChecker, type RuleName } from "../invariants/index.js";
import { readyCounts } from "../projections/index.js";
import { scheduleFaults } from "./faults.js";
import type { StoredRecord } from "./memory-log.js";
import type { SimulationOptions } from "./options.js";
import { eachTurn } from "./turn.js";
import { World } from "./world.js";

/** The simulation's own invariants, beside check-log's rules. */
export type SimInvariant = "shard-on-two-nodes" | "not-converged";

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

  world.onStored = (r) => checker.observe(r);

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
