/**
 * `llmgw events`: the log decoded, one line per event for people or one
 * JSON object per line for tools. Malformed messages are shown as such, with
 * their sequence, and so are refused events (stored on a subject their kind
 * may not be written to, never folded); nothing is skipped silently.
 */
import { createRegistry, toJson } from "@bufbuild/protobuf";
import { type Command, Option } from "commander";
import { stringify as stringifyYaml } from "yaml";
import { file_llmgw_v1_agent } from "../../gen/llmgw/v1/agent_pb.js";
import { EventSchema, file_llmgw_v1_events } from "../../gen/llmgw/v1/events_pb.js";
import { invalidNodeIdReason } from "../../ids/index.js";
import { type LogError, type RefusedEvent, Subjects } from "../../log/index.js";
import { describeEvent } from "../../reconciler/index.js";
import { readVia } from "../api-access.js";
import { type ApiEventRecord, apiEvents } from "../api-reads.js";
import { CliError, intArg, type NatsSecurityFlags } from "../common.js";
import { openLogForReading } from "../read-log.js";
import { isoTime } from "../time.js";
import { withLogOrApiOptions } from "./log-options.js";
import {
  type ApiFlags,
  call,
  clientFor,
  type OutputFormat,
  outputOf,
  withOutputOption,
} from "./operator-common.js";

interface EventsFlags extends NatsSecurityFlags, ApiFlags {
  nats: string;
  stream: string;
  subjectPrefix: string;
  archive?: string;
  fromSeq?: number;
  untilSeq?: number;
  subject: string[];
  node?: string;
  follow?: boolean;
}

const registry = createRegistry(file_llmgw_v1_events, file_llmgw_v1_agent);

export function registerEvents(program: Command): void {
  const cmd = withLogOrApiOptions(program.command("events"));
  withOutputOption(cmd)
    .description(
      "print the log decoded, one line per event (-o json: one JSON object per line; -o wide adds the nodes and replicas it concerns).\n" +
        "Through the operator API with a token (--api, LLMGW_API_URL or the current context), or from NATS itself with --nats on the command line",
    )
    .addOption(new Option("--from-seq <n>", "start at this sequence").argParser(intArg("--from-seq")))
    .addOption(
      new Option("--until-seq <n>", "stop after this sequence")
        .argParser(intArg("--until-seq"))
        .conflicts("follow"),
    )
    .option(
      "--subject <subject>",
      "only these subjects (repeatable; wildcards * and >; relative to the prefix unless it starts with it), e.g. session.* or node.gpu-a1; a node id's dots are written '_' in a subject (node.gpu-1_dc1_example_com)",
      (v: string, prev: string[]) => [...prev, v],
      [] as string[],
    )
    .option(
      "--node <id>",
      "only the subjects of this node (its session, what it reported, operator intent), the id as typed (gpu-1.dc1.example.com); the passes that name it: `llmgw explain node`",
    )
    .option("--follow", "keep printing new events until Ctrl-C")
    .option(
      "--json",
      "one JSON object per line: seq, time, subject, kind and the event in protobuf JSON (a refused event: with `refused`, the reason; the same as -o json)",
    )
    .action(async (flags: EventsFlags, self: Command) => {
      const badNode = flags.node === undefined ? undefined : invalidNodeIdReason(flags.node);
      if (badNode) throw new CliError(`invalid --node: ${badNode}`);
      if (readVia(self) === "api") await runEventsViaApi(flags);
      else await runEvents(flags);
    });
}

/** The subjects asked for, whole under `prefix`; `--node` adds the node's session, report and intent subjects. */
function subjectsOf(prefix: string, given: string[], node: string | undefined): string[] {
  const subjects = new Subjects(prefix);
  const out = given.map((s) => (s === prefix || s.startsWith(`${prefix}.`) ? s : `${prefix}.${s}`));
  if (node !== undefined) {
    out.push(subjects.session(node), subjects.node(node), subjects.operator(node));
  }
  return out;
}

/** One event as `llmgw events` prints it in `format` (`llmgw simulate` prints a failure's last events with it). */
export function eventLine(
  format: OutputFormat,
  r: Omit<ApiEventRecord, "event"> & { event?: unknown },
): string {
  switch (format) {
    case "json":
    case "yaml": {
      const obj = r.malformed
        ? { seq: r.seq, subject: r.subject, malformed: r.malformed }
        : {
            seq: r.seq,
            time: isoTime(r.timeMs),
            timeMs: r.timeMs,
            subject: r.subject,
            kind: r.kind ?? "unknown",
            ...(r.refused === undefined ? {} : { refused: r.refused }),
            event: r.event,
          };
      return format === "json" ? JSON.stringify(obj) : `---\n${stringifyYaml(obj).trimEnd()}`;
    }
    case "table":
    case "wide": {
      if (r.malformed)
        return `${String(r.seq).padStart(8)}  ${"-".padEnd(24)}  ${r.subject}  MALFORMED  ${r.malformed}`;
      // Stored on a subject its kind may not be written to: never folded.
      if (r.refused !== undefined)
        return `${String(r.seq).padStart(8)}  ${isoTime(r.timeMs)}  ${r.subject}  REFUSED ${r.kind}  ${r.refused}`;
      const line = `${String(r.seq).padStart(8)}  ${isoTime(r.timeMs)}  ${r.subject}  ${r.kind}  ${r.text}`;
      if (format === "table") return line;
      const nodes = (r.nodeIds ?? []).join(",") || "-";
      const replicas = (r.replicaIds ?? []).join(",") || "-";
      return `${line}  [nodes ${nodes}; replicas ${replicas}]`;
    }
    default: {
      const never: never = format;
      throw new Error(`unknown format ${String(never)}`);
    }
  }
}

/**
 * Runs `list` until it ends, Ctrl-C or a closed pipe (`| head` ends the
 * listing quietly), writing what it emits: while following, each line as it
 * comes; while reading history, in blocks. `out.line` writes a line without
 * flushing.
 */
async function writeListing(
  follow: boolean,
  list: (emit: (line: string) => Promise<void>, out: LineWriter, signal: AbortSignal) => Promise<void>,
): Promise<void> {
  const ac = new AbortController();
  const onSigint = () => ac.abort();
  process.once("SIGINT", onSigint);
  process.once("SIGTERM", onSigint);
  process.stdout.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code === "EPIPE") ac.abort();
  });
  const out = new LineWriter();
  const emit = async (line: string) => {
    out.line(line);
    if (follow || out.pending > 256) await out.flush();
  };
  try {
    await list(emit, out, ac.signal);
    await out.flush();
  } finally {
    process.off("SIGINT", onSigint);
    process.off("SIGTERM", onSigint);
  }
}

/** The same listing, paged from the operator API (GET /v1/events): a token and no NATS credentials. */
async function runEventsViaApi(flags: EventsFlags): Promise<void> {
  const client = clientFor(flags);
  const format = outputOf(flags);
  // Subjects relative to the API's prefix: the API puts its own in front.
  const subjects = subjectsOf("_", flags.subject, flags.node).map((s) =>
    s.startsWith("_.") ? s.slice(2) : s,
  );
  await writeListing(flags.follow === true, (emit, _out, signal) =>
    call(async () => {
      for await (const r of apiEvents(client, {
        ...(flags.fromSeq === undefined ? {} : { fromSeq: flags.fromSeq }),
        ...(flags.untilSeq === undefined ? {} : { untilSeq: flags.untilSeq }),
        subjects,
        follow: flags.follow === true,
        signal,
      })) {
        await emit(eventLine(format, r));
      }
    }),
  );
}

async function runEvents(flags: EventsFlags): Promise<void> {
  const format = outputOf(flags);
  const log = await openLogForReading(flags, "llmgw events");
  try {
    await writeListing(flags.follow === true, async (emit, out, signal) => {
      const subjects = subjectsOf(log.subjects.prefix, flags.subject, flags.node);
      const showMalformed = (err: LogError, raw: { seq: number; subject: string; data: Uint8Array }) => {
        if (format === "json") {
          out.line(
            JSON.stringify({
              seq: raw.seq,
              subject: raw.subject,
              malformed: err.message,
              bytes: raw.data.length,
            }),
          );
        } else {
          out.line(
            eventLine(format, { seq: raw.seq, timeMs: 0, subject: raw.subject, malformed: err.message }),
          );
        }
      };
      const showRefused = (r: RefusedEvent) => {
        out.line(
          eventLine(format, {
            seq: r.seq,
            timeMs: r.timeMs,
            subject: r.subject,
            kind: r.kind,
            refused: r.reason,
            event:
              format === "json" || format === "yaml" ? toJson(EventSchema, r.event, { registry }) : undefined,
          }),
        );
      };
      for await (const r of log.read({
        ...(flags.fromSeq === undefined ? {} : { fromSeq: flags.fromSeq }),
        ...(flags.untilSeq === undefined ? {} : { untilSeq: flags.untilSeq }),
        ...(subjects.length > 0 ? { subjects } : {}),
        follow: flags.follow === true,
        signal,
        onMalformed: showMalformed,
        onRefused: showRefused,
      })) {
        const d = describeEvent(r.event);
        await emit(
          eventLine(format, {
            seq: r.seq,
            timeMs: r.timeMs,
            subject: r.subject,
            kind: format === "json" || format === "yaml" ? (r.event.body.case ?? "unknown") : d.kind,
            text: d.text,
            nodeIds: d.nodeIds,
            replicaIds: d.replicaIds,
            // Encoded only where it is printed.
            event:
              format === "json" || format === "yaml" ? toJson(EventSchema, r.event, { registry }) : undefined,
          }),
        );
      }
    });
  } finally {
    await log.close();
  }
}

/** Buffers lines and writes them in blocks, waiting for the pipe to drain. */
class LineWriter {
  #lines: string[] = [];
  get pending(): number {
    return this.#lines.length;
  }
  line(s: string): void {
    this.#lines.push(s);
  }
  async flush(): Promise<void> {
    if (this.#lines.length === 0) return;
    const text = `${this.#lines.join("\n")}\n`;
    this.#lines = [];
    if (!process.stdout.write(text)) {
      await new Promise<void>((resolve) => {
        const done = () => {
          process.stdout.off("drain", done);
          process.stdout.off("error", done);
          resolve();
        };
        process.stdout.once("drain", done);
        process.stdout.once("error", done);
      });
    }
  }
}
