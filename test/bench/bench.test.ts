import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { promisify } from "node:util";

const run = promisify(execFile);
const bin = join(import.meta.dirname, "../../bin/llmgw.js");

/** Figures each scenario reports in quick mode (names vary with the scale; counts do not). */
const FIGURES: Record<string, number> = {
  ingest: 9,
  "fan-in": 6,
  replay: 7,
  placement: 21,
  convergence: 8,
  router: 8,
  "agent-engines": 3,
  simulate: 3,
  history: 7,
  growth: 7,
};
const SCENARIOS = Object.keys(FIGURES).length;

describe("llmgw bench --quick", () => {
  it("runs every scenario in a child process and writes every figure to the JSON file", {
    timeout: 420_000,
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "llmgw-bench-"));
    try {
      const out = join(dir, "results.json");
      const r = await run(process.execPath, [bin, "bench", "--quick", "--out", out], {
        timeout: 400_000,
        maxBuffer: 16 * 1024 * 1024,
      });
      assert.match(r.stdout, /results: /);
      // A progress line per scenario, numbered in the order they run.
      for (const name of Object.keys(FIGURES))
        assert.match(
          r.stderr,
          new RegExp(`bench \\d+/${SCENARIOS} ${name}`),
          `a progress line of ${name} on stderr`,
        );
      const json = JSON.parse(readFileSync(out, "utf8")) as {
        mode: string;
        runs: number;
        machine: Record<string, unknown>;
        failures: unknown[];
        results: Array<{
          scenario: string;
          runs: number;
          figures: Array<{
            name: string;
            value: number;
            unit: string;
            n: number;
            median: number;
            min: number;
            max: number;
          }>;
        }>;
      };
      assert.equal(json.mode, "quick");
      // --quick runs each scenario once, and says so above the table.
      assert.equal(json.runs, 1);
      assert.match(r.stdout, /each value is one run \(--quick/);
      assert.deepEqual(json.failures, []);
      for (const k of ["nproc", "cpu", "memoryBytes", "node", "natsServer"]) assert.ok(k in json.machine, k);
      assert.deepEqual(json.results.map((x) => x.scenario).sort(), Object.keys(FIGURES).sort());
      for (const res of json.results) {
        assert.equal(
          res.figures.length,
          FIGURES[res.scenario],
          `${res.scenario}: ${JSON.stringify(res.figures)}`,
        );
        assert.equal(res.runs, 1, res.scenario);
        for (const f of res.figures) {
          assert.ok(Number.isFinite(f.value), `${res.scenario} / ${f.name}: ${f.value}`);
          // One run: its value is the median, the least and the greatest.
          assert.deepEqual(
            [f.n, f.median, f.min, f.max],
            [1, f.value, f.value, f.value],
            `${res.scenario} / ${f.name}`,
          );
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
