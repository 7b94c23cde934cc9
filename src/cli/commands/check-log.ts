/**
 * `llmgw check-log`: reads the whole log and verifies the invariants of
 * docs/ARCHITECTURE.md over it (src/invariants). Exit 0 when the log keeps them, 1 when
 * it breaks one (or cannot be read), 2 on bad usage.
 */
import { readFile } from "node:fs/promises";
import { type Command, Option } from "commander";
import {
  type AckedList,
  type CheckedEvent,
  checkLog,
  DEFAULT_SUPERSEDE_GRACE_MS,
  formatViolation,
  parseAckedList,
} from "../../invariants/index.js";
import {
  CliError,
  EXIT,
  intArg,
  type NatsSecurityFlags,
  prefixOption,
  streamOption,
  withNatsOptions,
} from "../common.js";
import { ProgressLine } from "../progress.js";
import { openLogForReading } from "../read-log.js";

interface CheckLogFlags extends NatsSecurityFlags {
  nats: string;
  stream: string;
  subjectPrefix: string;
  acked?: string;
  supersedeGraceMs: number;
  json?: boolean;
}

export function registerCheckLog(program: Command): void {
  withNatsOptions(program.command("check-log"))
    .description(
      "verify the invariants over the whole log: no shard slot started twice, one current session per node, " +
        "one pass per log position, commands only to current sessions, acknowledged events stored once, " +
        "every event on a subject its kind may be written to, replay determinism (exit 0 clean, 1 violations, 2 usage)",
    )
    .addOption(streamOption())
    .addOption(prefixOption())
    .option(
      "--acked <file>",
      "the agents' record of acknowledged messages: a JSON array or JSON lines of {nodeId, sessionId, messageId} (what `llmgw sim --acked-out` writes); each must be in the log exactly once",
    )
    .addOption(
      new Option(
        "--supersede-grace-ms <ms>",
        "how long a superseded session may still write events after the newer one was stored",
      )
        .default(DEFAULT_SUPERSEDE_GRACE_MS)
        .argParser(intArg("--supersede-grace-ms")),
    )
    .option("--json", "one JSON object: counts and every violation {rule, seq, message}")
    .action(async (flags: CheckLogFlags) => {
      await runCheckLog(flags);
    });
}

async function readAcked(file: string): Promise<AckedList> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw new CliError(`invalid --acked: cannot read ${file}: ${(err as Error).message}`);
  }
  try {
    return parseAckedList(text);
  } catch (err) {
    throw new CliError(`invalid --acked ${file}: ${(err as Error).message}`);
  }
}

async function runCheckLog(flags: CheckLogFlags): Promise<void> {
  // Usage first: a bad --acked file is reported before anything is read.
  const acked = flags.acked === undefined ? [] : await readAcked(flags.acked);
  const log = await openLogForReading(flags, "llmgw check-log");
  const records: CheckedEvent[] = [];
  const malformed: Array<{ seq: number; message: string }> = [];
  const refused: Array<{ seq: number; subject: string; kind: string; reason: string }> = [];
  try {
    const target = await log.lastSeq();
    const reading = new ProgressLine(process.stderr, "check-log", "read");
    try {
      for await (const r of log.read({
        untilSeq: target,
        onMalformed: (err, raw) => malformed.push({ seq: raw.seq, message: err.message }),
        onRefused: (r) => refused.push({ seq: r.seq, subject: r.subject, kind: r.kind, reason: r.reason }),
      })) {
        records.push({ seq: r.seq, timeMs: r.timeMs, event: r.event });
        reading.update({ folded: records.length, seq: r.seq, fromSeq: 0, targetSeq: target });
      }
    } finally {
      reading.done();
    }
  } finally {
    await log.close();
  }
  const checking = new ProgressLine(process.stderr, "check-log", "checked");
  const report = checkLog(records, {
    acked,
    malformed,
    refused,
    supersedeGraceMs: flags.supersedeGraceMs,
    onProgress: (done) =>
      checking.update({
        folded: done,
        seq: records[done - 1]?.seq ?? 0,
        fromSeq: 0,
        targetSeq: records.at(-1)?.seq ?? 0,
      }),
  });
  checking.done();
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(report)}\n`);
  } else {
    for (const v of report.violations) process.stdout.write(`${formatViolation(v)}\n`);
    const span = report.events === 0 ? "an empty log" : `sequences ${report.firstSeq}–${report.lastSeq}`;
    const summary =
      `${report.events} events (${span}), ${report.sessions} sessions, ${report.passes} passes` +
      (flags.acked === undefined ? "" : `, ${report.acked} acknowledged messages`);
    process.stdout.write(
      report.violations.length === 0
        ? `ok: ${summary}: every invariant holds\n`
        : `${report.violations.length} violation${report.violations.length === 1 ? "" : "s"} in ${summary}\n`,
    );
  }
  if (report.violations.length > 0) process.exitCode = EXIT.failure;
}
