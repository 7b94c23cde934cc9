/**
 * `llmgw simulate` throughput: simulated fleet-hours per CPU-minute at 50
 * and 1,000 nodes with every fault kind, and seeds per minute at the
 * defaults (50 nodes, 60 simulated minutes). CPU is this process's (user +
 * system): the loop is single-threaded and does no I/O.
 *
 * The rate is the steady one of a long run (`llmgw simulate --seeds 1000`
 * runs every seed in one process): two untimed seeds at the defaults first
 * have the hot code compiled, which would otherwise be a third of the CPU of
 * a two-seed `--quick` run (with one seed of 30 minutes, the first of three
 * runs still came out a quarter slower than the two after it). Their CPU is
 * given in the notes.
 *
 * The raw limit, measured after each part in the same run: the bare loop.
 * The same scheduler and the same turns (`eachTurn`: each entry runs after
 * the promise jobs of the one before), run for as many entries over the same
 * simulated span as the seeds took, every entry empty, one interval timer
 * per node: what a simulation of that many steps costs before anything in it
 * does any work. The ratio is the share of the simulation's CPU that is the
 * loop itself.
 */
import {
  eachTurn,
  parseFaultList,
  parseSimulationOptions,
  runSeed,
  Scheduler,
  SIM_EPOCH_MS,
} from "../../src/simulation/index.js";
import { figure, type Scenario } from "../support/result.js";

/** Seeds outside the measured ones: they only warm the compiled code. */
const WARM_UP_SEEDS = [1_000_007, 1_000_008];
const WARM_UP_MINUTES = 60;

interface Part {
  hours: number;
  events: number;
  steps: number;
  violations: number;
  cpuMinutes: number;
  seeds: number;
  /** The bare loop over the same steps: its CPU-minutes. */
  bareCpuMinutes: number;
}

const cpuMinutesSince = (cpu0: NodeJS.CpuUsage) => {
  const cpu = process.cpuUsage(cpu0);
  return (cpu.user + cpu.system) / 1e6 / 60;
};

async function measure(nodes: number, minutes: number, seeds: number[]): Promise<Part> {
  const cpu0 = process.cpuUsage();
  let hours = 0;
  let events = 0;
  let violations = 0;
  const spans: Array<{ steps: number; simulatedMs: number }> = [];
  for (const seed of seeds) {
    const r = await runSeed(parseSimulationOptions({ seed, minutes, nodes, faults: parseFaultList("all") }));
    hours += r.simulatedMs / 3_600_000;
    events += r.events;
    if (r.failure) violations++;
    spans.push({ steps: r.steps, simulatedMs: r.simulatedMs });
  }
  const cpuMinutes = cpuMinutesSince(cpu0);
  const bare0 = process.cpuUsage();
  for (const s of spans) await bareLoop(nodes, s.steps, s.simulatedMs);
  const bareCpuMinutes = cpuMinutesSince(bare0);
  const steps = spans.reduce((n, s) => n + s.steps, 0);
  return { hours, events, steps, violations, cpuMinutes, seeds: seeds.length, bareCpuMinutes };
}

/** `steps` empty entries over `simulatedMs` through the simulation's scheduler and turns: one interval per node. */
async function bareLoop(nodes: number, steps: number, simulatedMs: number): Promise<void> {
  const s = new Scheduler(SIM_EPOCH_MS);
  const period = Math.max(1, Math.round((simulatedMs * nodes) / Math.max(1, steps)));
  const empty = () => {};
  for (let i = 0; i < nodes; i++) s.after((period * i) / nodes, () => s.every(period, empty));
  let ran = 0;
  await eachTurn(() => {
    const fn = s.next(Number.POSITIVE_INFINITY);
    if (fn === undefined) return false;
    fn();
    return ++ran < steps;
  });
}

export const simulate: Scenario = {
  name: "simulate",
  describe:
    "deterministic simulation: simulated fleet-hours per CPU-minute at 50 and 1,000 nodes, seeds per minute; raw: the bare loop over as many steps",
  async run(ctx) {
    ctx.progress(
      `warm-up: seeds ${WARM_UP_SEEDS.join(", ")}, 50 nodes × ${WARM_UP_MINUTES} simulated minutes (untimed)`,
    );
    const warmUp = await measure(50, WARM_UP_MINUTES, WARM_UP_SEEDS);
    const seeds50 = ctx.quick ? [1, 2] : [1, 2, 3, 4, 5, 6];
    ctx.progress(`50 nodes: ${seeds50.length} seeds × 60 simulated minutes`);
    const fifty = await measure(50, 60, seeds50);
    const minutes1000 = ctx.quick ? 10 : 30;
    ctx.progress(`1,000 nodes: 1 seed × ${minutes1000} simulated minutes`);
    const thousand = await measure(1000, minutes1000, [1]);
    const rate = (p: Part) => p.hours / p.cpuMinutes;
    const bare = (p: Part, per: number) => ({
      name: `the bare loop: ${p.steps.toLocaleString("en")} empty steps through the same scheduler and turns`,
      value: Number((per / p.bareCpuMinutes).toFixed(1)),
    });
    const rate50 = rate(fifty);
    const stepCost = (p: Part, cpuMinutes: number) => ((cpuMinutes * 60e6) / p.steps).toFixed(2);
    return {
      params: {
        seeds50: seeds50.length,
        minutes1000,
        faults: "all",
        warmUpSeeds: WARM_UP_SEEDS.length,
        warmUpMinutes: WARM_UP_MINUTES,
      },
      figures: [
        figure(
          "simulated fleet-hours per CPU-minute, 50 nodes",
          Number(rate50.toFixed(1)),
          "fleet-hours/CPU-min",
          { raw: bare(fifty, fifty.hours), goal: "≥ 100", met: rate50 >= 100 },
        ),
        figure(
          "simulated fleet-hours per CPU-minute, 1,000 nodes",
          Number(rate(thousand).toFixed(2)),
          "fleet-hours/CPU-min",
          { raw: bare(thousand, thousand.hours) },
        ),
        figure(
          "seeds per CPU-minute (50 nodes × 60 simulated minutes)",
          Number((fifty.seeds / fifty.cpuMinutes).toFixed(1)),
          "seeds/CPU-min",
          { raw: bare(fifty, fifty.seeds) },
        ),
      ],
      notes: [
        `warm-up (untimed): ${(warmUp.cpuMinutes * 60).toFixed(1)} CPU-s for ${warmUp.hours.toFixed(2)} fleet-hours of 50 nodes`,
        `50 nodes: ${fifty.events} events, ${fifty.steps} steps, ${fifty.violations} failing seed(s); 1,000 nodes: ${thousand.events} events, ${thousand.steps} steps, ${thousand.violations} failing seed(s)`,
        `CPU per step (µs): 50 nodes ${stepCost(fifty, fifty.cpuMinutes)} (bare loop ${stepCost(fifty, fifty.bareCpuMinutes)}), 1,000 nodes ${stepCost(thousand, thousand.cpuMinutes)} (bare loop ${stepCost(thousand, thousand.bareCpuMinutes)})`,
      ],
    };
  },
};
