/**
 * `llmgw check-log`: reads the whole log and verifies the invariants of
 * docs/ARCHITECTURE.md over it (src/invariants). Exit 0 when the log keeps them, 1 when
 * it breaks one (or cannot be read), 2 on bad usage. With --redecide it also
 * runs decide again for every recorded pass (reconciler/explain/redecide.ts).
 */
import { readFile } from "node:fs/promises";
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { type Command, Option } from "commander";
import { EventSchema } from "../../gen/llmgw/v1/events_pb.js";
import {
  type AckedList,
  type CheckedEvent,
  checkLog,
  DEFAULT_SUPERSEDE_GRACE_MS,
  formatViolation,
  parseAckedList,
} from "../../invariants/index.js";
import {
  fitPassBytes,
  formatRedecided,
  NOT_REDERIVED,
  type ReconcilerConfig,
  type RedecideReport,
  redecideLog,
} from "../../reconciler/index.js";
import { readVia } from "../api-access.js";
import { apiEvents } from "../api-reads.js";
import { CliError, EXIT, intArg, type NatsSecurityFlags } from "../common.js";
import { ProgressLine } from "../progress.js";
import { openLogForReading } from "../read-log.js";
import { withLogOrApiOptions } from "./log-options.js";
import { type ApiFlags, call, clientFor } from "./operator-common.js";
import { loadConfig } from "./what-if.js";

interface CheckLogFlags extends NatsSecurityFlags, ApiFlags {
  nats: string;
  stream: string;
  subjectPrefix: string;
  archive?: string;
  acked?: string;
  supersedeGraceMs: number;
  redecide?: boolean;
  config?: string;
  json?: boolean;
}

interface ReadRecords {
  records: CheckedEvent[];
  malformed: Array<{ seq: number; message: string }>;
  /** Events stored on a subject their kind may not be written to (never folded). */
  refused: Array<{ seq: number; subject: string; kind: string; reason: string }>;
  /** The NATS server's max_payload, when read from NATS: the runner fits its pass limit to it. */
  maxPayload?: number;
}

export function registerCheckLog(program: Command): void {
  const cmd = withLogOrApiOptions(program.command("check-log"));
  cmd
    .description(
      "verify the invariants over the whole log: no shard slot started twice, one current session per node, " +
        "one pass per log position and no older lease's pass between a newer one's, commands only to current sessions, acknowledged events stored once, " +
        "no drain below a model's minAvailable (without one, make-before-break) nor a rollout below replicas − maxUnavailable, " +
        "every event on a subject its kind may be written to, replay determinism; with --redecide, that decide run again on " +
        "the state each pass observed decides what the pass recorded (exit 0 clean, 1 violations, 2 usage).\n" +
        "The records come from the operator API (a viewer token; the check runs here), or from NATS with --nats on the command line",
    )
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
    .option(
      "--redecide",
      "for every reconcile pass, run decide again on the fleet folded up to the sequence the pass observed, with the time it recorded, " +
        "and report each pass whose decisions, commands or truncation differ (rule redecide: the pass and the first decision that differs). " +
        "The log does not record the reconciler's config (give it with --config) nor the gateways' leases (taken from the state and the pass's own gateway-loss decisions)",
    )
    .option(
      "--config <file>",
      "with --redecide: the config the reconciler ran with (its --config file, YAML or JSON; missing fields take the defaults)",
    )
    .option(
      "--json",
      "one JSON object: counts and every violation {rule, seq, message}; with --redecide also redecide {passes, differing, notRederived}",
    )
    .action(async (flags: CheckLogFlags, self: Command) => {
      await runCheckLog(flags, readVia(self));
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

/** The whole log to its current end, paged from the operator API (GET /v1/events). */
async function readViaApi(flags: CheckLogFlags): Promise<ReadRecords> {
  const client = clientFor(flags);
  const records: CheckedEvent[] = [];
  const malformed: Array<{ seq: number; message: string }> = [];
  const refused: ReadRecords["refused"] = [];
  const target = (
    await call(() => client.send((api) => api.GET("/v1/events", { params: { query: { limit: 1 } } })))
  ).body.lastSeq;
  const reading = new ProgressLine(process.stderr, "check-log", "read");
  try {
    await call(async () => {
      for await (const r of apiEvents(client, { untilSeq: target })) {
        if (r.malformed !== undefined || r.event === undefined) {
          malformed.push({ seq: r.seq, message: r.malformed ?? "no event" });
          continue;
        }
        if (r.refused !== undefined) {
          refused.push({ seq: r.seq, subject: r.subject, kind: r.kind ?? "unknown", reason: r.refused });
          continue;
        }
        let event: CheckedEvent["event"];
        try {
          event = fromJson(EventSchema, r.event as JsonValue, { ignoreUnknownFields: true });
        } catch (err) {
          malformed.push({
            seq: r.seq,
            message: `the API's JSON of it does not decode: ${(err as Error).message}`,
          });
          continue;
        }
        records.push({ seq: r.seq, timeMs: r.timeMs, event });
        reading.update({ folded: records.length, seq: r.seq, fromSeq: 0, targetSeq: target });
      }
    });
  } finally {
    reading.done();
  }
  return { records, malformed, refused };
}

/** The whole log to its current end, read from NATS with reader credentials. */
async function readViaNats(flags: CheckLogFlags): Promise<ReadRecords> {
  const log = await openLogForReading(flags, "llmgw check-log");
  const maxPayload = log.nc.info?.max_payload;
  const records: CheckedEvent[] = [];
  const malformed: Array<{ seq: number; message: string }> = [];
  const refused: ReadRecords["refused"] = [];
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
  return { records, malformed, refused, ...(maxPayload === undefined ? {} : { maxPayload }) };
}

/** Decide again for every pass (--redecide), with a progress line of its own. */
function redecide(records: readonly CheckedEvent[], config: ReconcilerConfig): RedecideReport {
  const progress = new ProgressLine(process.stderr, "check-log --redecide", "folded");
  try {
    return redecideLog(records, {
      config,
      onProgress: (done) =>
        progress.update({
          folded: done,
          seq: records[done - 1]?.seq ?? 0,
          fromSeq: 0,
          targetSeq: records.at(-1)?.seq ?? 0,
        }),
    });
  } finally {
    progress.done();
  }
}

async function runCheckLog(flags: CheckLogFlags, via: "nats" | "api"): Promise<void> {
  // Usage first: a bad --acked or --config file is reported before anything is read.
  const acked = flags.acked === undefined ? [] : await readAcked(flags.acked);
  if (flags.config !== undefined && !flags.redecide)
    throw new CliError("--config is the reconciler's config for --redecide: give --redecide with it");
  const config = flags.redecide ? loadConfig(flags.config) : undefined;
  const { records, malformed, refused, maxPayload } =
    via === "api" ? await readViaApi(flags) : await readViaNats(flags);
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
  // The runner lowers maxPassBytes to what its NATS server carries: so does
  // the check, read from the same server (through the API, it is unknown).
  const redecided =
    config === undefined ? undefined : redecide(records, fitPassBytes(config, maxPayload).config);
  for (const p of redecided?.differing ?? [])
    report.violations.push({ rule: "redecide", seq: p.seq, message: formatRedecided(p) });
  if (flags.json) {
    process.stdout.write(
      `${JSON.stringify(
        redecided === undefined
          ? report
          : {
              ...report,
              redecide: { ...redecided, notRederived: NOT_REDERIVED, config: flags.config ?? null },
            },
      )}\n`,
    );
  } else {
    for (const v of report.violations) process.stdout.write(`${formatViolation(v)}\n`);
    const span = report.events === 0 ? "an empty log" : `sequences ${report.firstSeq}–${report.lastSeq}`;
    const summary =
      `${report.events} events (${span}), ${report.sessions} sessions, ${report.passes} passes` +
      (flags.acked === undefined ? "" : `, ${report.acked} acknowledged messages`) +
      (redecided === undefined
        ? ""
        : `, ${redecided.passes} passes re-decided (${redecided.passes - redecided.differing.length} the same)`);
    if (redecided !== undefined) {
      // Say what the check could not take from the log, so a difference is read rightly.
      process.stdout.write(`redecide config: ${flags.config ?? "the defaults (no --config)"}\n`);
      for (const n of NOT_REDERIVED) process.stdout.write(`redecide: not in the log: ${n}\n`);
      if (redecided.differing.length > 0)
        process.stdout.write(
          `redecide: ${redecided.differing.length} of ${redecided.passes} passes differ; ` +
            "another config than the reconciler's makes passes differ too: check that --config is the file it ran with\n",
        );
    }
    process.stdout.write(
      report.violations.length === 0
        ? `ok: ${summary}: every invariant holds\n`
        : `${report.violations.length} violation${report.violations.length === 1 ? "" : "s"} in ${summary}\n`,
    );
  }
  if (report.violations.length > 0) process.exitCode = EXIT.failure;
}
