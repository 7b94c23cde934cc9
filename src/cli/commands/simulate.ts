/**
 * `llmgw simulate`: the whole control plane in one seeded, single-threaded
 * loop on simulated time (src/simulation), under faults drawn from the
 * seed, with check-log's invariants and the simulation's own checked after
 * every step. A failing seed is printed with its step, the invariant and
 * the last events; `--seed S` runs it again exactly.
 */
import { type Command, Option } from "commander";
import { describeEvent } from "../../reconciler/index.js";
import {
  FAULT_KINDS,
  parseFaultList,
  parseSimulationOptions,
  runSeeds,
  type SeedFailure,
} from "../../simulation/index.js";
import { CliError, EXIT, intArg } from "../common.js";
import { eventLine } from "./events.js";

interface SimulateFlags {
  seed?: number;
  seeds?: number;
  minutes: string;
  nodes: number;
  faults: string;
  lastEvents: number;
  json?: boolean;
}

export function registerSimulate(program: Command): void {
  program
    .command("simulate")
    .description(
      "run the control plane (gateway session core, log, folds, decide under leader election, the real agent " +
        "with simulated GPUs and engines) in one seeded loop on simulated time, under faults drawn from the seed, " +
        "checking check-log's invariants and the simulation's own after every step (shards on two nodes every 5 simulated s; acked events, replay and convergence at the end). A failing seed prints the seed, " +
        "the step, the invariant and the last events; `--seed S` replays it exactly (the same digest every time). " +
        "Exits 1 when any seed breaks an invariant",
    )
    .addOption(new Option("--seed <n>", "the (first) seed to run (default 1)").argParser(intArg("--seed")))
    .addOption(
      new Option("--seeds <n>", "how many seeds to run, from --seed on (default 1)").argParser(
        intArg("--seeds"),
      ),
    )
    .option("--minutes <m>", "simulated minutes per seed", "60")
    .addOption(new Option("--nodes <k>", "GPU nodes (8 GPUs each)").argParser(intArg("--nodes")).default(50))
    .option(
      "--faults <list>",
      `fault kinds, comma-separated, or "all" or "none": ${FAULT_KINDS.join(", ")}`,
      "all",
    )
    .addOption(
      new Option("--last-events <n>", "events printed with a failure")
        .argParser(intArg("--last-events"))
        .default(20),
    )
    .option(
      "--json",
      'one line: {"seeds", "simulatedHours", "events", "violations" (a count), "digest", "failures": [{"seed", "step", "invariant"}]}',
    )
    .action(async (flags: SimulateFlags) => {
      const minutes = Number(flags.minutes);
      if (!Number.isFinite(minutes) || minutes <= 0)
        throw new CliError(`--minutes must be a positive number, got ${JSON.stringify(flags.minutes)}`);
      let faults: ReturnType<typeof parseFaultList>;
      let options: ReturnType<typeof parseSimulationOptions>;
      try {
        faults = parseFaultList(flags.faults);
        options = parseSimulationOptions({
          seed: flags.seed ?? 1,
          minutes,
          nodes: flags.nodes,
          faults,
          lastEvents: flags.lastEvents,
        });
      } catch (err) {
        throw new CliError((err as Error).message);
      }
      const first = flags.seed ?? 1;
      const count = flags.seeds ?? 1;
      if (count < 1) throw new CliError("--seeds must be at least 1");
      const seeds = Array.from({ length: count }, (_, i) => (first + i) >>> 0);
      const { seed: _seed, ...base } = options;
      const out = await runSeeds(base, seeds, (r) => {
        if (flags.json) return;
        if (r.failure) process.stdout.write(failureText(r.failure));
        else if (count > 1)
          process.stdout.write(
            `seed ${r.seed}: ok, ${r.events} events, ${r.passes} passes, digest ${r.digest}\n`,
          );
      });
      const s = out.summary;
      if (flags.json) process.stdout.write(`${JSON.stringify(s)}\n`);
      else
        process.stdout.write(
          `${s.seeds} seed(s), ${s.simulatedHours} simulated hours of ${options.nodes} nodes, ${s.events} events, ` +
            `${s.violations} violation(s), digest ${s.digest}\n`,
        );
      if (s.violations > 0) process.exitCode = EXIT.failure;
    });
}

/** A failing seed: where, which invariant, and the last events in `llmgw events` format. */
function failureText(f: SeedFailure): string {
  const lines = [
    `seed ${f.seed} FAILED at step ${f.step} (${(f.atMs / 60_000).toFixed(2)} simulated minutes): ${f.invariant}`,
    `  ${f.message}`,
    `  last ${f.lastEvents.length} events:`,
    ...f.lastEvents.map((r) => {
      const d = describeEvent(r.event);
      return `  ${eventLine("table", { seq: r.seq, timeMs: r.timeMs, subject: r.subject, kind: d.kind, text: d.text })}`;
    }),
    `  replay: llmgw simulate --seed ${f.seed} (with the same --minutes, --nodes and --faults)`,
  ];
  return `${lines.join("\n")}\n`;
}
