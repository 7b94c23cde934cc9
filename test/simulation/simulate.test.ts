/**
 * `llmgw simulate` (src/simulation): a fixed set of seeds under every fault
 * kind with no violation, the regression seeds (regression-seeds.json), the
 * same seed giving the same digest twice, the CLI's --json line, and each
 * planted bug (planted.ts, on a patched copy of src/) found within its seeds.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { parseFaultList, parseSimulationOptions, runSeed, runSeeds } from "../../src/simulation/index.js";
import { PLANTED_BUGS, plantedCopy } from "./planted.js";

const ROOT = join(import.meta.dirname, "../..");
const ALL = parseFaultList("all");

/** The CI run: these seeds, 20 nodes, 30 simulated minutes, every fault kind, 12 minutes to converge. */
const CI = { seeds: [1, 2, 3, 4], minutes: 30, nodes: 20, convergeMinutes: 12 };

describe("llmgw simulate", () => {
  it("runs the CI seeds under every fault kind with no violation", async () => {
    const { seed: _s, ...base } = parseSimulationOptions({
      seed: 0,
      minutes: CI.minutes,
      nodes: CI.nodes,
      faults: ALL,
      convergeMinutes: CI.convergeMinutes,
    });
    const out = await runSeeds(base, CI.seeds);
    assert.deepEqual(
      out.failures.map((f) => `seed ${f.seed} step ${f.step}: ${f.invariant}: ${f.message}`),
      [],
    );
    assert.ok(out.summary.events > 1000, `the seeds stored events (${out.summary.events})`);
    assert.ok(
      out.results.some((r) => r.fenced > 0),
      "some leader's stale pass was fenced by the log",
    );
  });

  it("runs every regression seed with no violation", async () => {
    const list = JSON.parse(readFileSync(join(import.meta.dirname, "regression-seeds.json"), "utf8")) as {
      seeds: Array<{
        seed: number;
        minutes: number;
        nodes: number;
        faults: string;
        convergeMinutes?: number;
        note: string;
      }>;
    };
    assert.ok(list.seeds.length > 0);
    for (const e of list.seeds) {
      const r = await runSeed(
        parseSimulationOptions({
          seed: e.seed,
          minutes: e.minutes,
          nodes: e.nodes,
          faults: parseFaultList(e.faults),
          ...(e.convergeMinutes === undefined ? {} : { convergeMinutes: e.convergeMinutes }),
        }),
      );
      assert.equal(
        r.failure,
        undefined,
        `regression seed ${e.seed} (${e.note}): ${r.failure?.invariant}: ${r.failure?.message}`,
      );
    }
  });

  it("gives the same digest for the same seed, and another for another seed", async () => {
    const opts = (seed: number) =>
      parseSimulationOptions({ seed, minutes: 20, nodes: 10, faults: ALL, convergeMinutes: 10 });
    const a = await runSeed(opts(11));
    const b = await runSeed(opts(11));
    const c = await runSeed(opts(12));
    assert.equal(a.digest, b.digest);
    assert.equal(a.events, b.events);
    assert.equal(a.steps, b.steps);
    assert.notEqual(a.digest, c.digest);
  });

  it("prints one JSON line with exactly the fields the issue names, and refuses a bad flag naming it", async () => {
    const run = promisify(execFile);
    const { stdout } = await run(process.execPath, [
      join(ROOT, "bin/llmgw.js"),
      "simulate",
      "--seed",
      "3",
      "--seeds",
      "2",
      "--minutes",
      "3",
      "--nodes",
      "3",
      "--json",
    ]);
    const lines = stdout.trim().split("\n");
    assert.equal(lines.length, 1);
    const j = JSON.parse(lines[0]!) as Record<string, unknown>;
    assert.deepEqual(Object.keys(j).sort(), [
      "digest",
      "events",
      "failures",
      "seeds",
      "simulatedHours",
      "violations",
    ]);
    assert.equal(j["seeds"], 2);
    assert.equal(j["violations"], 0);
    assert.equal(j["simulatedHours"], 0.1);
    await assert.rejects(
      run(process.execPath, [join(ROOT, "bin/llmgw.js"), "simulate", "--faults", "gateway-crash,meteor"]),
      (err: { code?: number; stderr?: string }) =>
        err.code === 2 && /--faults: unknown fault kind "meteor"/.test(err.stderr ?? ""),
    );
  });

  for (const bug of PLANTED_BUGS) {
    it(`finds a planted bug: ${bug.name}`, async () => {
      const copy = plantedCopy(ROOT, bug);
      try {
        assert.ok(copy.applied, `the patch for "${bug.name}" no longer applies to ${bug.file}`);
        const sim = (await import(
          pathToFileURL(join(copy.dir, "src/simulation/index.ts")).href
        )) as typeof import("../../src/simulation/index.js");
        let found: string | undefined;
        for (let seed = 1; seed <= bug.run.seeds && found === undefined; seed++) {
          const r = await sim.runSeed(
            sim.parseSimulationOptions({
              seed,
              minutes: bug.run.minutes,
              nodes: bug.run.nodes,
              faults: sim.parseFaultList(bug.run.faults.join(",")),
              ...(bug.run.convergeMinutes === undefined ? {} : { convergeMinutes: bug.run.convergeMinutes }),
            }),
          );
          if (r.failure) found = `seed ${seed}: ${r.failure.invariant}: ${r.failure.message}`;
        }
        assert.ok(found, `"${bug.name}" not found within ${bug.run.seeds} seeds`);
      } finally {
        copy.remove();
      }
    });
  }
});
