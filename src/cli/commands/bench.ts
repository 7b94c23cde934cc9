import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { Command } from "commander";
import { PACKAGE_ROOT } from "../../package-root.js";
import { CliError } from "../common.js";

interface BenchFlags {
  quick?: boolean;
  runs?: string;
  only?: string;
  out?: string;
}

/**
 * `llmgw bench`: the benchmarks live beside the sources (bench/), not in the
 * package or the image, and run as a program of their own (bench/main.ts) in
 * a child process: nothing under src/ imports bench/.
 */
export function registerBench(program: Command): void {
  program
    .command("bench")
    .description(
      "measure the control plane against the raw limits of its parts (each scenario starts its own nats-server)",
    )
    .option("--quick", "small numbers, one run of each scenario: the whole run takes under two minutes")
    .option(
      "--runs <n>",
      "runs of each scenario (1-100); each figure is their median, with min and max (default 3; 1 with --quick)",
    )
    .option(
      "--only <scenarios>",
      "comma-separated: ingest, fan-in, replay, history, growth, placement, agent-engines, simulate, convergence, router",
    )
    .option("--out <file>", "JSON result file (default .bench/results-<time>.json)")
    .action(async (f: BenchFlags) => {
      const main = join(PACKAGE_ROOT, "bench", "main.ts");
      if (!existsSync(main))
        throw new CliError(
          `the benchmarks are not in this installation (no ${main}); run them from a source checkout`,
        );
      const args = [
        ...(f.quick ? ["--quick"] : []),
        // One argument, so a value such as "-1" reaches the check that names the flag.
        ...(f.runs !== undefined ? [`--runs=${f.runs}`] : []),
        ...(f.only !== undefined ? ["--only", f.only] : []),
        ...(f.out !== undefined ? ["--out", f.out] : []),
      ];
      const node = [process.execPath, "--import", "tsx", main, ...args];
      // Fan-in holds one descriptor per mTLS stream (10,000 by default): the
      // child's soft limit of open files is raised to the hard one first,
      // which any process may do, through the shell where there is one.
      const [cmd, ...argv] = existsSync("/bin/sh")
        ? ["/bin/sh", "-c", 'ulimit -n "$(ulimit -Hn)" 2>/dev/null; exec "$@"', "llmgw-bench", ...node]
        : node;
      const child = spawn(cmd!, argv, { stdio: "inherit", cwd: process.cwd() });
      // Ctrl-C reaches the child through the terminal; a SIGTERM sent to us is passed on.
      const forward = () => child.kill("SIGTERM");
      process.once("SIGTERM", forward);
      const code = await new Promise<number>((resolve, reject) => {
        child.once("error", reject);
        child.once("exit", (c, signal) => resolve(c ?? (signal ? 1 : 0)));
      });
      process.off("SIGTERM", forward);
      process.exitCode = code;
    });
}
