import type { Command } from "commander";
import { CliError, EXIT } from "../common.js";

interface BenchFlags {
  quick?: boolean;
  only?: string;
  out?: string;
}

/**
 * `llmgw bench`: the benchmarks live beside the sources (bench/), not in the
 * shipped image, so they are loaded only when the command runs.
 */
export function registerBench(program: Command): void {
  program
    .command("bench")
    .description(
      "measure the control plane against the raw limits of its parts (each scenario starts its own nats-server)",
    )
    .option("--quick", "small numbers: the whole run takes under two minutes")
    .option("--only <scenarios>", "comma-separated: ingest, fan-in, replay, placement, convergence")
    .option("--out <file>", "JSON result file (default .bench/results-<time>.json)")
    .action(async (f: BenchFlags) => {
      let mod: typeof import("../../../bench/run.js");
      try {
        mod = await import("../../../bench/run.js");
      } catch (err) {
        throw new CliError(`the benchmarks are not in this installation (bench/): ${(err as Error).message}`);
      }
      const only = f.only
        ?.split(",")
        .map((s) => s.trim())
        .filter((s) => s.length > 0);
      let out: Awaited<ReturnType<typeof mod.runBench>>;
      try {
        out = await mod.runBench({
          quick: f.quick === true,
          ...(only ? { only } : {}),
          ...(f.out ? { out: f.out } : {}),
          stdout: process.stdout,
          stderr: process.stderr,
        });
      } catch (err) {
        throw new CliError((err as Error).message);
      }
      if (out.run.failures.length > 0) process.exitCode = EXIT.failure;
      // Every scenario cleans up after itself; should one fail mid-way and
      // leave a handle open, the run still ends (it must stop by itself).
      setTimeout(() => process.exit(), 10_000).unref();
    });
}
