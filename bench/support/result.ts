/**
 * What a benchmark scenario reports: figures, each beside the raw limit of
 * the part it runs on, measured in the same run on the same machine.
 */
export interface Figure {
  /** What is measured, e.g. "ingest rate". */
  name: string;
  value: number;
  unit: string;
  /** The raw limit measured in the same run (omitted when there is none). */
  raw?: { name: string; value: number };
  /** value / raw (or raw / value when lower is better, so ≥ 1 is never worse than raw). */
  ratio?: number;
  /** The goal, as text (e.g. "ratio ≥ 0.6", "< 200 ms"). */
  goal?: string;
  met?: boolean;
}

/**
 * A figure as the bench reports it: the median of `n` runs of its scenario
 * (`value` is that median), with the least and greatest run beside it. The
 * ratio is each run's own ratio against the raw limit of that run, and the
 * median of those; `met` says the goal was met by more than half the runs,
 * which for a goal on either the value or the ratio is the goal at the median.
 */
export interface ReportedFigure extends Figure {
  /** How many runs the figure is the median of. */
  n: number;
  median: number;
  min: number;
  max: number;
  /** Every run's value, in run order. */
  runs: number[];
  /** The raw limit's median, least and greatest over the runs (`raw.value` is the median). */
  raw?: { name: string; value: number; min: number; max: number };
  /** The least and greatest of the runs' ratios (`ratio` is their median). */
  ratioMin?: number;
  ratioMax?: number;
}

/** What one run of a scenario returns. */
export interface ScenarioRun {
  params: Record<string, unknown>;
  figures: Figure[];
  notes: string[];
}

export interface ScenarioResult {
  scenario: string;
  /** How many times the scenario ran; each figure is the median of these runs. */
  runs: number;
  params: Record<string, unknown>;
  figures: ReportedFigure[];
  notes: string[];
  durationMs: number;
}

export interface ScenarioContext {
  quick: boolean;
  /** One progress line (stderr), replaced as the scenario goes. */
  progress(msg: string): void;
}

export interface Scenario {
  name: string;
  describe: string;
  run(ctx: ScenarioContext): Promise<ScenarioRun>;
}

export function figure(
  name: string,
  value: number,
  unit: string,
  opts: {
    raw?: { name: string; value: number };
    /** Higher values are better (rates); default true. */
    higherIsBetter?: boolean;
    goal?: string;
    met?: boolean;
  } = {},
): Figure {
  const f: Figure = { name, value, unit };
  if (opts.raw) {
    f.raw = opts.raw;
    const up = opts.higherIsBetter ?? true;
    if (opts.raw.value > 0 && value > 0) f.ratio = up ? value / opts.raw.value : opts.raw.value / value;
  }
  if (opts.goal !== undefined) f.goal = opts.goal;
  if (opts.met !== undefined) f.met = opts.met;
  return f;
}

export function fmt(v: number): string {
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (a >= 100) return Math.round(v).toLocaleString("en");
  if (a >= 10) return v.toFixed(1);
  if (a >= 1) return v.toFixed(2);
  return v.toPrecision(2);
}

/**
 * The figures of `runs.length` runs of one scenario as one report: each
 * figure (matched by its place in the list, since a name may carry a count
 * that moves from run to run; the first run names it) becomes the median of
 * its runs, with min and max; ratios are taken per run, then their median.
 * Notes are every run's, each once, marked with the run when there are several.
 */
export function combineRuns(
  runs: ScenarioRun[],
): Pick<ScenarioResult, "runs" | "params" | "figures" | "notes"> {
  const first = runs[0];
  if (!first) throw new Error("combineRuns: no runs to combine");
  const count = first.figures.length;
  for (const [i, r] of runs.entries())
    if (r.figures.length !== count)
      throw new Error(
        `run ${i + 1} reported ${r.figures.length} figures, run 1 reported ${count}: a scenario must report the same figures every run`,
      );
  const n = runs.length;
  const figures = first.figures.map((head, k) => {
    const each = runs.map((r) => r.figures[k]!);
    const values = each.map((f) => f.value);
    const spread = summarize(values);
    const out: ReportedFigure = {
      name: head.name,
      value: spread.median,
      unit: head.unit,
      n,
      median: spread.median,
      min: spread.min,
      max: spread.max,
      runs: values,
    };
    const raws = each.flatMap((f) => (f.raw ? [f.raw.value] : []));
    if (head.raw && raws.length > 0) {
      const r = summarize(raws);
      out.raw = { name: head.raw.name, value: r.median, min: r.min, max: r.max };
    }
    const ratios = each.flatMap((f) => (f.ratio === undefined ? [] : [f.ratio]));
    if (ratios.length > 0) {
      const r = summarize(ratios);
      out.ratio = r.median;
      out.ratioMin = r.min;
      out.ratioMax = r.max;
    }
    if (head.goal !== undefined) out.goal = head.goal;
    const judged = each.filter((f) => f.met !== undefined);
    if (judged.length > 0) out.met = judged.filter((f) => f.met).length * 2 > judged.length;
    return out;
  });
  const notes: string[] = [];
  for (const [i, r] of runs.entries())
    for (const note of r.notes) {
      const line = n > 1 ? `run ${i + 1}/${n}: ${note}` : note;
      if (!notes.includes(line)) notes.push(line);
    }
  return { runs: n, params: first.params, figures, notes };
}

/** Median (the mean of the middle two for an even count), least and greatest. */
export function summarize(xs: number[]): { median: number; min: number; max: number } {
  if (xs.length === 0) return { median: Number.NaN, min: Number.NaN, max: Number.NaN };
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  const median = s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
  return { median, min: s[0]!, max: s.at(-1)! };
}

/**
 * A readable table of every figure: the median of each figure's runs, and
 * with more than one run its least and greatest ("min–max") beside the
 * value, the raw limit and the ratio.
 */
export function renderTable(results: ScenarioResult[]): string {
  const spread = results.some((r) => r.runs > 1);
  const range = (lo: number | undefined, hi: number | undefined, show: (v: number) => string) =>
    spread && lo !== undefined && hi !== undefined ? ` (${show(lo)}–${show(hi)})` : "";
  const ratio = (v: number) => v.toFixed(2);
  const rows: string[][] = [
    [
      "scenario",
      "figure",
      spread ? "median (min–max)" : "value",
      "raw limit (same run)",
      "ratio",
      "goal",
      "",
    ],
  ];
  for (const r of results) {
    for (const f of r.figures) {
      rows.push([
        r.scenario,
        f.name,
        `${fmt(f.value)} ${f.unit}${range(f.min, f.max, fmt)}`,
        f.raw ? `${fmt(f.raw.value)} ${f.unit} (${f.raw.name})` : "",
        f.ratio === undefined ? "" : `${ratio(f.ratio)}${range(f.ratioMin, f.ratioMax, ratio)}`,
        f.goal ?? "",
        f.met === undefined ? "" : f.met ? "ok" : "MISSED",
      ]);
    }
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => (i === 2 || i === 4 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return [line(rows[0]!), widths.map((w) => "-".repeat(w)).join("  "), ...rows.slice(1).map(line)].join("\n");
}

/** The line above the table: what each value is the median of. */
export function describeRuns(runs: number, quick: boolean): string {
  if (runs > 1)
    return `each value is the median of ${runs} runs of its scenario, min–max beside it; each ratio the median of the runs' own ratios`;
  return `each value is one run${quick ? " (--quick runs once unless --runs says otherwise)" : ""}: no spread; --runs N for the median of N`;
}

/** Percentile (0..100) of unsorted numbers; NaN when empty. */
export function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  const i = Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1));
  return s[i]!;
}
