/**
 * Runs the benchmark scenarios one after another (each starts and stops its
 * own nats-server and processes), each `runs` times in a row, shows a
 * progress line on stderr, prints a table of every figure's median over the
 * runs with its min and max, and writes every figure to a JSON file.
 */

import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, freemem, totalmem } from "node:os";
import { dirname, join } from "node:path";
import { natsServerBinary } from "../test/harness/nats.js";
import { agentEngines } from "./scenarios/agent-engines.js";
import { convergence } from "./scenarios/convergence.js";
import { fanIn } from "./scenarios/fan-in.js";
import { growth } from "./scenarios/growth.js";
import { history } from "./scenarios/history.js";
import { ingest } from "./scenarios/ingest.js";
import { placement } from "./scenarios/placement.js";
import { replay } from "./scenarios/replay.js";
import { router } from "./scenarios/router.js";
import { simulate } from "./scenarios/simulate.js";
import {
  combineRuns,
  describeRuns,
  renderTable,
  type Scenario,
  type ScenarioResult,
  type ScenarioRun,
} from "./support/result.js";

// The scenarios that measure this process itself run before fan-in, whose 10,000 TLS agents
// live in this process and leave it a heap of ~2 GiB: placement (the memory of a process
// holding the fleet, and its passes' collections) and replay (the catch-up folds here).
export const SCENARIOS: Scenario[] = [
  placement,
  replay,
  agentEngines,
  simulate,
  history,
  growth,
  ingest,
  fanIn,
  convergence,
  router,
];

/** Runs of each scenario unless --runs says otherwise: three for the median and spread, one with --quick. */
export const DEFAULT_RUNS = 3;
export const DEFAULT_RUNS_QUICK = 1;

/** --runs: a whole number from 1 to 100 (each scenario runs that many times in a row). */
export function runsFrom(text: string): number | Error {
  const n = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isInteger(n) || n < 1 || n > 100)
    return new Error(`--runs: expected a whole number of runs from 1 to 100, got "${text}"`);
  return n;
}

export interface BenchOptions {
  quick: boolean;
  /** Runs of each scenario, each figure the median of them; default DEFAULT_RUNS (DEFAULT_RUNS_QUICK with quick). */
  runs?: number;
  only?: string[];
  /** JSON result file; default .bench/results-<time>.json */
  out?: string;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WriteStream;
}

export interface BenchRun {
  startedAt: string;
  mode: "quick" | "default";
  /** Runs of each scenario; each figure is the median of them. */
  runs: number;
  machine: Record<string, unknown>;
  results: ScenarioResult[];
  failures: Array<{ scenario: string; error: string }>;
}

export async function runBench(opts: BenchOptions): Promise<{ run: BenchRun; file: string }> {
  const chosen = opts.only ? SCENARIOS.filter((s) => opts.only!.includes(s.name)) : SCENARIOS;
  const unknown = (opts.only ?? []).filter((n) => !SCENARIOS.some((s) => s.name === n));
  if (unknown.length > 0)
    throw new Error(
      `unknown scenario(s) ${unknown.join(", ")}; known: ${SCENARIOS.map((s) => s.name).join(", ")}`,
    );
  const runs = opts.runs ?? (opts.quick ? DEFAULT_RUNS_QUICK : DEFAULT_RUNS);
  if (!Number.isInteger(runs) || runs < 1)
    throw new Error(`--runs: expected a whole number ≥ 1, got ${runs}`);
  const started = new Date();
  const run: BenchRun = {
    startedAt: started.toISOString(),
    mode: opts.quick ? "quick" : "default",
    runs,
    machine: machine(),
    results: [],
    failures: [],
  };
  // Interrupted: exit through the exit hooks, which kill the servers and processes started.
  for (const sig of ["SIGINT", "SIGTERM"] as const) process.once(sig, () => process.exit(130));
  const t0 = performance.now();
  let lastLine = 0;
  const tty = opts.stderr.isTTY;
  for (const [i, s] of chosen.entries()) {
    const head = `bench ${i + 1}/${chosen.length} ${s.name}`;
    let step = head;
    const progress = (msg: string) => {
      const now = performance.now();
      if (!tty && now - lastLine < 2_000) return;
      lastLine = now;
      const line = `${step} [${((now - t0) / 1000).toFixed(0)} s]: ${msg}`;
      opts.stderr.write(tty ? `\r${line.slice(0, (opts.stderr.columns ?? 120) - 1)}\x1b[K` : `${line}\n`);
    };
    progress("starting");
    const ts = performance.now();
    try {
      const each: ScenarioRun[] = [];
      for (let k = 1; k <= runs; k++) {
        step = runs > 1 ? `${head}, run ${k}/${runs}` : head;
        each.push(await s.run({ quick: opts.quick, progress }));
      }
      run.results.push({
        scenario: s.name,
        ...combineRuns(each),
        durationMs: Math.round(performance.now() - ts),
      });
    } catch (err) {
      run.failures.push({
        scenario: s.name,
        error: err instanceof Error ? (err.stack ?? err.message) : String(err),
      });
    }
    if (tty) opts.stderr.write("\n");
    const failed = run.failures.at(-1);
    opts.stderr.write(
      `${head}: ${((performance.now() - ts) / 1000).toFixed(1)} s${failed?.scenario === s.name ? ` FAILED: ${failed.error.split("\n")[0]}` : ""}\n`,
    );
  }
  const file = opts.out ?? join(".bench", `results-${started.toISOString().replace(/[:.]/g, "-")}.json`);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(run, null, 2)}\n`);
  opts.stdout.write(`\n${describeRuns(runs, opts.quick)}\n\n${renderTable(run.results)}\n`);
  for (const r of run.results) for (const n of r.notes) opts.stdout.write(`\n${r.scenario}: ${n}`);
  for (const f of run.failures) opts.stdout.write(`\n${f.scenario} FAILED: ${f.error}\n`);
  opts.stdout.write(`\n\nresults: ${file}\n`);
  return { run, file };
}

function machine(): Record<string, unknown> {
  let nats = "unknown";
  try {
    nats = execFileSync(natsServerBinary(), ["--version"], { encoding: "utf8" }).trim();
  } catch {
    // reported as unknown
  }
  return {
    nproc: cpus().length,
    cpu: cpus()[0]?.model ?? "unknown",
    memoryBytes: totalmem(),
    freeMemoryBytes: freemem(),
    node: process.version,
    natsServer: nats,
  };
}
