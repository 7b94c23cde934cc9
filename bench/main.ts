/**
 * The benchmarks as a program of their own: `llmgw bench` (and `npm run
 * bench`) run this file in a child process, so nothing under src/ imports
 * bench/ and the package ships without it. Flags as `llmgw bench --help`
 * describes them: --quick, --runs N, --only a,b, --out FILE. Exit 0 when every
 * scenario ran, 1 when one failed, 2 on bad usage.
 */
import { parseArgs } from "node:util";
import { runBench, runsFrom } from "./run.js";

async function main(): Promise<number> {
  let values: { quick?: boolean; runs?: string; only?: string; out?: string };
  try {
    ({ values } = parseArgs({
      args: process.argv.slice(2),
      options: {
        quick: { type: "boolean" },
        runs: { type: "string" },
        only: { type: "string" },
        out: { type: "string" },
      },
      strict: true,
    }));
  } catch (err) {
    process.stderr.write(`llmgw bench: ${(err as Error).message}\n`);
    return 2;
  }
  const runs = values.runs === undefined ? undefined : runsFrom(values.runs);
  if (runs instanceof Error) {
    process.stderr.write(`llmgw bench: ${runs.message}\n`);
    return 2;
  }
  const only = values.only
    ?.split(",")
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  try {
    const { run } = await runBench({
      quick: values.quick === true,
      ...(runs !== undefined ? { runs } : {}),
      ...(only ? { only } : {}),
      ...(values.out ? { out: values.out } : {}),
      stdout: process.stdout,
      stderr: process.stderr,
    });
    return run.failures.length > 0 ? 1 : 0;
  } catch (err) {
    process.stderr.write(`llmgw bench: ${(err as Error).message}\n`);
    return 2;
  }
}

const code = await main();
// Every scenario cleans up after itself; should one fail mid-way and leave a
// handle open, the run still ends (it must stop by itself).
process.exitCode = code;
setTimeout(() => process.exit(code), 10_000).unref();
