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
import type { Decision } from "../../gen/llmgw/v1/events_pb.js";
import { type FleetState, fleetProjection } from "../../projections/index.js";
import {
  type Difference,
  decide,
  describeConfigError,
  diffDecisions,
  type ReconcilerConfig,
  reconcilerConfigSchema,
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

interface PassResult {
  seq: number;
  nowMs: number;
  differences: Difference[];
}

function liveGateways(state: FleetState): Set<string> {
  return new Set(
    Object.values(state.inventory.gateways)
      .filter((g) => g.status === "running" || g.status === "draining")
      .map((g) => g.gatewayId),
  );
}

async function whatIf(flags: WhatIfFlags): Promise<void> {
  const config = loadConfig(flags.config);
  const log = await openLogForReading(flags, "llmgw-what-if");
  const results: PassResult[] = [];
  try {
    // The passes in range, and the state each decided on: its observed sequence.
    const passes: Array<{ seq: number; target: number; nowMs: number }> = [];
    for await (const r of log.read({
      subjects: [log.subjects.reconciler],
      fromSeq: flags.fromSeq ?? 1,
      ...(flags.toSeq !== undefined ? { untilSeq: flags.toSeq } : {}),
    })) {
      if (r.event.body.case !== "reconcilePass") continue;
      const observed = Number(r.event.body.value.observedSeq);
      const target = observed > 0 && observed < r.seq ? observed : r.seq - 1;
      passes.push({ seq: r.seq, target, nowMs: Number(r.event.body.value.nowUnixMs) });
    }
    const last = passes.at(-1)?.seq;
    if (last !== undefined) {
      const due = [...passes].sort((a, b) => a.target - b.target || a.seq - b.seq);
      const alternatives = new Map<number, Decision[]>();
      let state = fleetProjection.initialState();
      let next = 0;
      const decideUpTo = (seq: number) => {
        for (; next < due.length && (due[next] as (typeof due)[number]).target <= seq; next++) {
          const p = due[next] as (typeof due)[number];
          const out = decide({ state, config, nowMs: p.nowMs, liveGateways: liveGateways(state) });
          alternatives.set(p.seq, out.decisions);
        }
      };
      decideUpTo(0);
      for await (const r of log.read({ untilSeq: last })) {
        decideUpTo(r.seq - 1);
        const alt = alternatives.get(r.seq);
        if (alt && r.event.body.case === "reconcilePass") {
          results.push({
            seq: r.seq,
            nowMs: Number(r.event.body.value.nowUnixMs),
            differences: diffDecisions(r.event.body.value.decisions, alt),
          });
          alternatives.delete(r.seq);
        }
        state = fleetProjection.evolve(state, r.event, { seq: r.seq, timeMs: r.timeMs });
        decideUpTo(r.seq);
      }
    }
  } finally {
    await log.close();
  }
  print(flags, config, results);
}

function print(flags: WhatIfFlags, config: ReconcilerConfig, results: PassResult[]): void {
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
