/**
 * `llmgw what-if --config <file> [--autoscale MODEL=min:max:metric:target]`:
 * replays the log and, at every recorded reconcile pass in the range, runs
 * decide again on the state that pass decided on, with another config (and
 * other autoscale settings); prints where the outcomes differ. The recorded
 * history is kept (each pass is compared on its own), and nothing is
 * written to the log.
 */
import { readFileSync } from "node:fs";
import type { Command } from "commander";
import { parse as parseYaml } from "yaml";
import { logWhatIfReader } from "../../operator/index.js";
import {
  describeConfigError,
  type ReconcilerConfig,
  reconcilerConfigSchema,
  runWhatIf,
  type WhatIfPass,
} from "../../reconciler/index.js";
import { readVia } from "../api-access.js";
import { CliError, intArg } from "../common.js";
import { type LogFlags, openLogForReading, withLogOrApiOptions } from "./log-options.js";
import { type ApiFlags, call, clientFor } from "./operator-common.js";

interface WhatIfFlags extends LogFlags, ApiFlags {
  config?: string;
  autoscale?: string[];
  fromSeq?: number;
  toSeq?: number;
}

/** The config file's data (YAML or JSON), unvalidated; no file: {} (the defaults). */
function readConfigData(file: string | undefined): Record<string, unknown> {
  if (file === undefined) return {};
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new CliError(`--config ${file}: ${(err as Error).message}`);
  }
  let raw: unknown;
  try {
    // YAML is a superset of JSON: one parser reads both.
    raw = parseYaml(text) ?? {};
  } catch (err) {
    throw new CliError(`--config ${file}: not YAML or JSON: ${(err as Error).message}`);
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw))
    throw new CliError(`--config ${file}: expected a mapping of config fields`);
  return raw as Record<string, unknown>;
}

export function loadConfig(file: string | undefined, autoscale: readonly string[] = []): ReconcilerConfig {
  return parseConfig(configData(file, autoscale), file);
}

/** The config file's data with the --autoscale flags merged in, unvalidated (what POST /v1/what-if takes). */
function configData(file: string | undefined, autoscale: readonly string[]): Record<string, unknown> {
  const raw = readConfigData(file);
  if (autoscale.length > 0) {
    const fromFile = raw["autoscale"];
    const merged: Record<string, unknown> =
      typeof fromFile === "object" && fromFile !== null ? { ...(fromFile as Record<string, unknown>) } : {};
    for (const text of autoscale) {
      const [model, spec] = parseAutoscaleFlag(text);
      merged[model] = spec;
    }
    raw["autoscale"] = merged;
  }
  return raw;
}

function parseConfig(raw: Record<string, unknown>, file: string | undefined): ReconcilerConfig {
  const parsed = reconcilerConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const where = file === undefined ? "--autoscale" : `--config ${file}`;
    throw new CliError(`${where}: ${describeConfigError(parsed.error)}`);
  }
  return parsed.data;
}

/** `MODEL=min:max:metric:target[:tolerance]` → the config's autoscale entry (checked by the config schema). */
export function parseAutoscaleFlag(text: string): [string, Record<string, unknown>] {
  const eq = text.indexOf("=");
  const parts = eq > 0 ? text.slice(eq + 1).split(":") : [];
  if (eq <= 0 || parts.length < 4 || parts.length > 5)
    throw new CliError(
      `--autoscale ${JSON.stringify(text)}: expected MODEL=MIN:MAX:METRIC:TARGET[:TOLERANCE], e.g. chat=1:8:queue_depth:10`,
    );
  const [min, max, metric, target, tolerance] = parts as [string, string, string, string, string | undefined];
  const num = (name: string, v: string) => {
    const n = Number(v);
    if (v.trim() === "" || !Number.isFinite(n))
      throw new CliError(
        `--autoscale ${JSON.stringify(text)}: ${name} must be a number, got ${JSON.stringify(v)}`,
      );
    return n;
  };
  return [
    text.slice(0, eq),
    {
      min: num("MIN", min),
      max: num("MAX", max),
      metric,
      target: num("TARGET", target),
      ...(tolerance === undefined ? {} : { tolerance: num("TOLERANCE", tolerance) }),
    },
  ];
}

async function whatIf(flags: WhatIfFlags, self: Command): Promise<void> {
  if (flags.config === undefined && (flags.autoscale ?? []).length === 0)
    throw new CliError("give --config <file>, --autoscale MODEL=MIN:MAX:METRIC:TARGET, or both");
  const data = configData(flags.config, flags.autoscale ?? []);
  // Checked here first, so a bad file is named the same way whichever way the run goes.
  const config = parseConfig(data, flags.config);
  const range = {
    ...(flags.fromSeq !== undefined ? { fromSeq: flags.fromSeq } : {}),
    ...(flags.toSeq !== undefined ? { toSeq: flags.toSeq } : {}),
  };
  if (readVia(self) === "api") {
    // Through the API: a token with the operator role (what-if re-runs decide at every pass).
    const client = clientFor(flags);
    const { body } = await call(() =>
      client.send((api) => api.POST("/v1/what-if", { body: { config: data, ...range } })),
    );
    // The document gives the config as an object of the reconciler's config schema, not field by field.
    print(flags, body.config as unknown as ReconcilerConfig, body.compared, body.passes);
    return;
  }
  const log = await openLogForReading(flags, "llmgw-what-if");
  let results: WhatIfPass[];
  try {
    results = (await runWhatIf(logWhatIfReader(log), config, range)).passes;
  } finally {
    await log.close();
  }
  print(
    flags,
    config,
    results.length,
    results.filter((r) => r.differences.length > 0),
  );
}

function print(
  flags: WhatIfFlags,
  config: ReconcilerConfig,
  compared: number,
  differing: WhatIfPass[],
): void {
  if (flags.json) {
    process.stdout.write(
      `${JSON.stringify({ config, compared, differing: differing.length, passes: differing }, null, 2)}\n`,
    );
    return;
  }
  const lines: string[] = [];
  for (const r of differing) {
    lines.push(`#${r.seq}  ${new Date(r.nowMs).toISOString()}`);
    for (const d of r.differences) {
      lines.push(`  ${d.subject}: ${d.record} (record) vs ${d.alternative} (alternative)`);
    }
  }
  lines.push(
    `${compared} pass(es) compared, ${differing.length} differ under the alternative config (policy ${config.policy}${autoscaleSummary(config)})`,
  );
  process.stdout.write(`${lines.join("\n")}\n`);
}

function autoscaleSummary(config: ReconcilerConfig): string {
  const entries = Object.entries(config.autoscale);
  if (entries.length === 0) return "";
  return `; autoscale ${entries.map(([m, a]) => `${m}=${a.min}:${a.max}:${a.metric}:${a.target}`).join(", ")}`;
}

export function registerWhatIf(program: Command): void {
  const cmd = withLogOrApiOptions(
    program
      .command("what-if")
      .description(
        "re-run decide over recorded history with another config or autoscale setting (writes nothing); through the operator API it needs a token with the operator role, from NATS --nats on the command line",
      )
      .option(
        "--config <file>",
        "the alternative reconciler config (YAML or JSON; missing fields take the defaults)",
      )
      .option(
        "--autoscale <model=min:max:metric:target>",
        "replay with this autoscale setting for MODEL instead of the catalog's (metric queue_depth or kv_cache_use; an optional 5th part is the tolerance; cooldowns and the stabilization window keep the catalog's, or the defaults); repeatable",
        (v: string, prev: string[] = []) => [...prev, v],
      )
      .option("--from-seq <seq>", "first log sequence whose passes are compared", intArg("--from-seq"))
      .option("--to-seq <seq>", "last log sequence whose passes are compared", intArg("--to-seq"))
      .option("--json", "print JSON"),
  );
  cmd.action((flags: WhatIfFlags, self: Command) => whatIf(flags, self));
}
