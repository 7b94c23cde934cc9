/**
 * `llmgw what-if --config <file>`: replays the log and, at every recorded
 * reconcile pass in the range, runs decide again on the state that pass
 * decided on, with another config; prints where the outcomes differ. The
 * recorded history is kept (each pass is compared on its own), and nothing
 * is written to the log.
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
import { CliError, intArg } from "../common.js";
import { type LogFlags, openLogForReading, withLogOptions } from "./log-options.js";

interface WhatIfFlags extends LogFlags {
  config: string;
  fromSeq?: number;
  toSeq?: number;
  json?: boolean;
}

export function loadConfig(file: string): ReconcilerConfig {
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
  const parsed = reconcilerConfigSchema.safeParse(raw);
  if (!parsed.success) throw new CliError(`--config ${file}: ${describeConfigError(parsed.error)}`);
  return parsed.data;
}

async function whatIf(flags: WhatIfFlags): Promise<void> {
  const config = loadConfig(flags.config);
  const log = await openLogForReading(flags, "llmgw-what-if");
  let results: WhatIfPass[];
  try {
    const range = {
      ...(flags.fromSeq !== undefined ? { fromSeq: flags.fromSeq } : {}),
      ...(flags.toSeq !== undefined ? { toSeq: flags.toSeq } : {}),
    };
    results = (await runWhatIf(logWhatIfReader(log), config, range)).passes;
  } finally {
    await log.close();
  }
  print(flags, config, results);
}

function print(flags: WhatIfFlags, config: ReconcilerConfig, results: WhatIfPass[]): void {
  const differing = results.filter((r) => r.differences.length > 0);
  if (flags.json) {
    process.stdout.write(
      `${JSON.stringify({ config, compared: results.length, differing: differing.length, passes: differing }, null, 2)}\n`,
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
    `${results.length} pass(es) compared, ${differing.length} differ under the alternative config (policy ${config.policy})`,
  );
  process.stdout.write(`${lines.join("\n")}\n`);
}

export function registerWhatIf(program: Command): void {
  withLogOptions(
    program
      .command("what-if")
      .description("re-run placement over recorded history with another config (writes nothing)")
      .requiredOption(
        "--config <file>",
        "the alternative reconciler config (YAML or JSON; missing fields take the defaults)",
      )
      .option("--from-seq <seq>", "first log sequence whose passes are compared", intArg("--from-seq"))
      .option("--to-seq <seq>", "last log sequence whose passes are compared", intArg("--to-seq"))
      .option("--json", "print JSON"),
  ).action((flags: WhatIfFlags) => whatIf(flags));
}
