/** Many seeds, one after the other, summed up as `llmgw simulate --json` prints them. */
import { Digest } from "./digest.js";
import type { SimulationOptions } from "./options.js";
import { runSeed, type SeedFailure, type SeedResult } from "./run.js";

export interface RunsSummary {
  seeds: number;
  simulatedHours: number;
  events: number;
  /** Seeds that broke an invariant. */
  violations: number;
  /** Over every seed's digest, in seed order: the same seeds give the same digest. */
  digest: string;
  failures: Array<{ seed: number; step: number; invariant: string }>;
}

export interface RunsOutcome {
  summary: RunsSummary;
  /** The failures in full (step, invariant, message, last events). */
  failures: SeedFailure[];
  results: SeedResult[];
}

/** Runs `seeds` in order with `base`'s other options; `onSeed` hears each result as it comes. */
export async function runSeeds(
  base: Omit<SimulationOptions, "seed">,
  seeds: readonly number[],
  onSeed?: (r: SeedResult) => void,
): Promise<RunsOutcome> {
  const digest = new Digest();
  const results: SeedResult[] = [];
  const failures: SeedFailure[] = [];
  let events = 0;
  let simulatedMs = 0;
  for (const seed of seeds) {
    const r = await runSeed({ ...base, seed });
    results.push(r);
    digest.text(r.digest);
    events += r.events;
    simulatedMs += r.simulatedMs;
    if (r.failure) failures.push(r.failure);
    onSeed?.(r);
  }
  return {
    summary: {
      seeds: seeds.length,
      simulatedHours: Math.round((simulatedMs / 3_600_000) * 1000) / 1000,
      events,
      violations: failures.length,
      digest: seeds.length === 1 ? (results[0]?.digest ?? digest.hex()) : digest.hex(),
      failures: failures.map((f) => ({ seed: f.seed, step: f.step, invariant: f.invariant })),
    },
    failures,
    results,
  };
}
