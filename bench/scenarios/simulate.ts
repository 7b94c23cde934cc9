/**
 * `llmgw simulate` throughput: simulated fleet-hours per CPU-minute at 50
 * and 1,000 nodes with every fault kind, and seeds per minute at the
 * defaults (50 nodes, 60 simulated minutes). CPU is this process's (user +
 * system): the loop is single-threaded and does no I/O.
 *
 * The rate is the steady one of a long run (`llmgw simulate --seeds 1000`
 * runs every seed in one process): one untimed seed first has the hot code
 * compiled, which would otherwise be a third of the CPU of a two-seed
 * `--quick` run. Its CPU is given in the notes.
 */
import { parseFaultList, parseSimulationOptions, runSeed } from "../../src/simulation/index.js";
import { figure, type Scenario } from "../support/result.js";

/** A seed outside the measured ones, and short: it only warms the compiled code. */
const WARM_UP_SEED = 1_000_007;
const WARM_UP_MINUTES = 30;

async function measure(nodes: number, minutes: number, seeds: number[]) {
  const cpu0 = process.cpuUsage();
  let hours = 0;
  let events = 0;
  let violations = 0;
  for (const seed of seeds) {
    const r = await runSeed(parseSimulationOptions({ seed, minutes, nodes, faults: parseFaultList("all") }));
    hours += r.simulatedMs / 3_600_000;
    events += r.events;
    if (r.failure) violations++;
  }
  const cpu = process.cpuUsage(cpu0);
  const cpuMinutes = (cpu.user + cpu.system) / 1e6 / 60;
  return { hours, events, violations, cpuMinutes, seeds: seeds.length };
}

export const simulate: Scenario = {
  name: "simulate",
  describe:
    "deterministic simulation: simulated fleet-hours per CPU-minute at 50 and 1,000 nodes, seeds per minute",
  async run(ctx) {
    ctx.progress(`warm-up: seed ${WARM_UP_SEED}, 50 nodes × ${WARM_UP_MINUTES} simulated minutes (untimed)`);
    const warmUp = await measure(50, WARM_UP_MINUTES, [WARM_UP_SEED]);
    const seeds50 = ctx.quick ? [1, 2] : [1, 2, 3, 4, 5, 6];
    ctx.progress(`50 nodes: ${seeds50.length} seeds × 60 simulated minutes`);
    const fifty = await measure(50, 60, seeds50);
    const minutes1000 = ctx.quick ? 10 : 30;
    ctx.progress(`1,000 nodes: 1 seed × ${minutes1000} simulated minutes`);
    const thousand = await measure(1000, minutes1000, [1]);
    const rate50 = fifty.hours / fifty.cpuMinutes;
    return {
      params: { seeds50: seeds50.length, minutes1000, faults: "all", warmUpMinutes: WARM_UP_MINUTES },
      figures: [
        figure(
          "simulated fleet-hours per CPU-minute, 50 nodes",
          Number(rate50.toFixed(1)),
          "fleet-hours/CPU-min",
          {
            goal: "≥ 100",
            met: rate50 >= 100,
          },
        ),
        figure(
          "simulated fleet-hours per CPU-minute, 1,000 nodes",
          Number((thousand.hours / thousand.cpuMinutes).toFixed(2)),
          "fleet-hours/CPU-min",
        ),
        figure(
          "seeds per CPU-minute (50 nodes × 60 simulated minutes)",
          Number((fifty.seeds / fifty.cpuMinutes).toFixed(1)),
          "seeds/CPU-min",
        ),
      ],
      notes: [
        `warm-up (untimed): ${(warmUp.cpuMinutes * 60).toFixed(1)} CPU-s for ${warmUp.hours.toFixed(2)} fleet-hours of 50 nodes`,
        `50 nodes: ${fifty.events} events, ${fifty.violations} failing seed(s); 1,000 nodes: ${thousand.events} events, ${thousand.violations} failing seed(s)`,
      ],
    };
  },
};
