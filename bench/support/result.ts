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

export interface ScenarioResult {
  scenario: string;
  params: Record<string, unknown>;
  figures: Figure[];
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
  run(ctx: ScenarioContext): Promise<Omit<ScenarioResult, "durationMs" | "scenario">>;
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

/** A readable table of every figure. */
export function renderTable(results: ScenarioResult[]): string {
  const rows: string[][] = [["scenario", "figure", "value", "raw limit (same run)", "ratio", "goal", ""]];
  for (const r of results) {
    for (const f of r.figures) {
      rows.push([
        r.scenario,
        f.name,
        `${fmt(f.value)} ${f.unit}`,
        f.raw ? `${fmt(f.raw.value)} ${f.unit} (${f.raw.name})` : "",
        f.ratio === undefined ? "" : f.ratio.toFixed(2),
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

/** Percentile (0..100) of unsorted numbers; NaN when empty. */
export function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  const i = Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1));
  return s[i]!;
}
