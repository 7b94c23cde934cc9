import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { describe, it } from "node:test";
import { promisify } from "node:util";
import { runsFrom } from "../../bench/run.js";
import { combineRuns, figure, renderTable, type ScenarioRun, summarize } from "../../bench/support/result.js";

const run = promisify(execFile);
const bin = join(import.meta.dirname, "../../bin/llmgw.js");

/** One run of a scenario reporting a rate against its raw limit, a time with a goal, and a count. */
function oneRun(rate: number, raw: number, ms: number, agents: number): ScenarioRun {
  return {
    params: { nodes: 10 },
    figures: [
      figure("events/s", rate, "events/s", { raw: { name: "bare read", value: raw }, goal: "ratio ≥ 0.5" }),
      figure(`${agents} agents back`, ms, "ms", { goal: "< 100 ms", met: ms < 100 }),
      figure("restarts", 0, "commands"),
    ],
    notes: [`moved ${agents} agents`, "same every run"],
  };
}

describe("bench runs: each figure the median of N runs", () => {
  it("summarize: median of odd and even counts, min and max", () => {
    assert.deepEqual(summarize([3, 1, 2]), { median: 2, min: 1, max: 3 });
    assert.deepEqual(summarize([4, 1, 3, 2]), { median: 2.5, min: 1, max: 4 });
    assert.deepEqual(summarize([7]), { median: 7, min: 7, max: 7 });
  });

  it("combines figures by place: median, min, max, n, every run's value; ratios per run, then their median", () => {
    // The ratios (0.5, 0.8, 0.6) have a median (0.6) that is no run's value / median raw (100 / 125).
    const r = combineRuns([oneRun(100, 200, 90, 5), oneRun(80, 100, 120, 6), oneRun(150, 250, 95, 5)]);
    assert.equal(r.runs, 3);
    const [rate, back, restarts] = r.figures;
    assert.ok(rate && back && restarts);
    assert.equal(rate.value, 100);
    assert.equal(rate.median, 100);
    assert.equal(rate.min, 80);
    assert.equal(rate.max, 150);
    assert.equal(rate.n, 3);
    assert.deepEqual(rate.runs, [100, 80, 150]);
    assert.deepEqual(rate.raw, { name: "bare read", value: 200, min: 100, max: 250 });
    assert.equal(rate.ratio, 0.6);
    assert.equal(rate.ratioMin, 0.5);
    assert.equal(rate.ratioMax, 0.8);
    assert.equal(rate.goal, "ratio ≥ 0.5");
    // The first run names a figure whose name carries a count.
    assert.equal(back.name, "5 agents back");
    assert.equal(back.value, 95);
    // Met by two runs of three: met at the median.
    assert.equal(back.met, true);
    assert.equal(restarts.ratio, undefined);
    assert.equal(restarts.raw, undefined);
    // Notes: each once, marked with its run.
    assert.deepEqual(r.notes, [
      "run 1/3: moved 5 agents",
      "run 1/3: same every run",
      "run 2/3: moved 6 agents",
      "run 2/3: same every run",
      "run 3/3: moved 5 agents",
      "run 3/3: same every run",
    ]);
  });

  it("a goal met by half the runs of an even count is not met; one run is reported as it is", () => {
    const even = combineRuns([oneRun(1, 1, 90, 1), oneRun(1, 1, 150, 1)]);
    assert.equal(even.figures[1]?.met, false);
    assert.equal(even.figures[1]?.value, 120);
    const one = combineRuns([oneRun(100, 200, 90, 5)]);
    assert.equal(one.runs, 1);
    assert.deepEqual(one.notes, ["moved 5 agents", "same every run"]);
    assert.equal(one.figures[0]?.min, 100);
    assert.equal(one.figures[0]?.max, 100);
  });

  it("runs reporting different figures are an error naming the runs", () => {
    const short = oneRun(1, 1, 1, 1);
    short.figures.pop();
    assert.throws(
      () => combineRuns([oneRun(1, 1, 1, 1), short]),
      /run 2 reported 2 figures, run 1 reported 3/,
    );
  });

  it("the table shows min–max beside the median and the ratio when there are several runs", () => {
    const r = combineRuns([oneRun(100, 200, 90, 5), oneRun(80, 100, 120, 6), oneRun(150, 250, 95, 5)]);
    const table = renderTable([{ scenario: "s", durationMs: 1, ...r }]);
    assert.match(table, /median \(min–max\)/);
    assert.match(table, /100 events\/s \(80\.0–150\)/);
    assert.match(table, /0\.60 \(0\.50–0\.80\)/);
    const single = renderTable([{ scenario: "s", durationMs: 1, ...combineRuns([oneRun(100, 200, 90, 5)]) }]);
    assert.doesNotMatch(single, /min–max/);
  });

  it("--runs takes a whole number from 1 to 100", () => {
    assert.equal(runsFrom("1"), 1);
    assert.equal(runsFrom("100"), 100);
    for (const bad of ["0", "-1", "2.5", "x", "", "101", "1e1"]) {
      const r = runsFrom(bad);
      assert.ok(r instanceof Error, `--runs ${bad}`);
      assert.match(r.message, /--runs: expected a whole number of runs from 1 to 100/);
    }
  });

  it("llmgw bench --runs -1 is refused with exit 2, naming the flag", async () => {
    for (const bad of ["-1"]) {
      const err = await run(process.execPath, [bin, "bench", "--runs", bad, "--only", "growth"]).then(
        () => assert.fail(`--runs ${bad} was accepted`),
        (e: { code: number; stderr: string }) => e,
      );
      assert.equal(err.code, 2, `--runs ${bad}: ${err.stderr}`);
      assert.match(err.stderr, /--runs: expected a whole number of runs from 1 to 100/);
    }
  });
});
