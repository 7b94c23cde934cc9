/**
 * `llmgw explain replica <id>` / `llmgw explain node <id>`: the reconciler
 * decisions (and commands) that touched it, read from the log up to --at.
 */
import { type Command, Option } from "commander";
import { invalidNodeIdReason } from "../../ids/index.js";
import { collectPasses } from "../../log/index.js";
import {
  formatTouches,
  type RecordedPass,
  type Touch,
  touchingNode,
  touchingReplica,
} from "../../reconciler/index.js";
import { readVia } from "../api-access.js";
import { CliError } from "../common.js";
import { type LogFlags, openLogForReading, withLogOrApiOptions } from "./log-options.js";
import { type ApiFlags, call, clientFor } from "./operator-common.js";

interface ExplainFlags extends LogFlags, ApiFlags {
  at?: string;
}

/** `--at` is a sequence (digits) or a time (anything Date.parse reads, e.g. 2026-05-28T20:00:00Z). */
export function parseAt(at: string | undefined): { untilSeq?: number; untilTimeMs?: number } {
  if (at === undefined) return {};
  if (/^\d+$/.test(at)) return { untilSeq: Number(at) };
  const t = Date.parse(at);
  if (Number.isNaN(t))
    throw new CliError(`--at must be a sequence number or a time, got ${JSON.stringify(at)}`);
  return { untilTimeMs: t };
}

async function passesAt(flags: LogFlags, at: string | undefined): Promise<RecordedPass[]> {
  const { untilSeq, untilTimeMs } = parseAt(at);
  const log = await openLogForReading(flags, "llmgw-explain");
  try {
    return await collectPasses(log, {
      ...(untilSeq !== undefined ? { untilSeq } : {}),
      ...(untilTimeMs !== undefined ? { untilTimeMs } : {}),
    });
  } finally {
    await log.close();
  }
}

/** The same decisions, selected by the operator API (GET /v1/explain/{replica,node}/ID): a token and no NATS credentials. */
async function touchesViaApi(what: "replica" | "node", id: string, flags: ExplainFlags): Promise<Touch[]> {
  const { untilSeq, untilTimeMs } = parseAt(flags.at);
  const query = {
    ...(untilSeq === undefined ? {} : { at: untilSeq }),
    ...(untilTimeMs === undefined ? {} : { time: new Date(untilTimeMs).toISOString() }),
  };
  const params = { path: { id }, query };
  const client = clientFor(flags);
  const { body } =
    what === "replica"
      ? await call(() => client.send((api) => api.GET("/v1/explain/replica/{id}", { params })))
      : await call(() => client.send((api) => api.GET("/v1/explain/node/{id}", { params })));
  return body.decisions;
}

function explainSubcommand(what: "replica" | "node", select: (p: RecordedPass[], id: string) => Touch[]) {
  return async (id: string, flags: ExplainFlags, self: Command) => {
    const bad = what === "node" ? invalidNodeIdReason(id) : undefined;
    if (bad) throw new CliError(`invalid <id>: ${bad}`);
    const touches =
      readVia(self) === "api"
        ? await touchesViaApi(what, id, flags)
        : select(await passesAt(flags, flags.at), id);
    if (flags.json) process.stdout.write(`${JSON.stringify({ [what]: id, decisions: touches }, null, 2)}\n`);
    else process.stdout.write(formatTouches(`${what} ${id}`, touches));
  };
}

export function registerExplain(program: Command): void {
  const explain = program
    .command("explain")
    .description(
      "the decisions that touched a replica or a node (through the operator API with a viewer token, or from NATS with --nats on the command line)",
    );
  const common = (cmd: Command) => {
    return withLogOrApiOptions(cmd)
      .addOption(new Option("--at <seq|time>", "read the log only up to this sequence or time"))
      .option("--json", "print JSON");
  };
  common(
    explain
      .command("replica <id>")
      .description(
        "decisions about a replica, its shards and its commands (why it sits where it does, or waits)",
      ),
  ).action(explainSubcommand("replica", touchingReplica));
  common(
    explain
      .command("node <id>")
      .description("decisions about a node: liveness, adoption, shards placed on it, commands"),
  ).action(explainSubcommand("node", touchingNode));
}
