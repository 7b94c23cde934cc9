/**
 * `llmgw events`: the log decoded, one line per event for people or one
 * JSON object per line for tools. Malformed messages are shown as such, with
 * their sequence, and so are refused events (stored on a subject their kind
 * may not be written to, never folded); nothing is skipped silently.
 */
import { createRegistry, toJson } from "@bufbuild/protobuf";
import { type Command, Option } from "commander";
import { file_llmgw_v1_agent } from "../../gen/llmgw/v1/agent_pb.js";
import { EventSchema, file_llmgw_v1_events } from "../../gen/llmgw/v1/events_pb.js";
import { invalidNodeIdReason, type Log, type LogError, type RefusedEvent } from "../../log/index.js";
import { describeEvent } from "../../reconciler/index.js";
import {
  CliError,
  intArg,
  type NatsSecurityFlags,
  prefixOption,
  streamOption,
  withNatsOptions,
} from "../common.js";
import { openLogForReading } from "../read-log.js";
import { isoTime } from "../time.js";

interface EventsFlags extends NatsSecurityFlags {
  nats: string;
  stream: string;
  subjectPrefix: string;
  fromSeq?: number;
  untilSeq?: number;
  subject: string[];
  node?: string;
  follow?: boolean;
  json?: boolean;
}

const registry = createRegistry(file_llmgw_v1_events, file_llmgw_v1_agent);

export function registerEvents(program: Command): void {
  withNatsOptions(program.command("events"))
    .description("print the log decoded, one line per event (--json: one JSON object per line)")
    .addOption(streamOption())
    .addOption(prefixOption())
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
      "one JSON object per line: seq, time, subject, kind and the event in protobuf JSON (a refused event: with `refused`, the reason)",
    )
    .action(async (flags: EventsFlags) => {
      await runEvents(flags);
    });
}

function subjectsOf(log: Log, given: string[], node: string | undefined): string[] {
  const prefix = log.subjects.prefix;
  const out = given.map((s) => (s === prefix || s.startsWith(`${prefix}.`) ? s : `${prefix}.${s}`));
  if (node !== undefined) {
    out.push(log.subjects.session(node), log.subjects.node(node), log.subjects.operator(node));
  }
  return out;
}

async function runEvents(flags: EventsFlags): Promise<void> {
  const badNode = flags.node === undefined ? undefined : invalidNodeIdReason(flags.node);
  if (badNode) throw new CliError(`invalid --node: ${badNode}`);
  const log = await openLogForReading(flags, "llmgw events");
  const ac = new AbortController();
  const onSigint = () => ac.abort();
  process.once("SIGINT", onSigint);
  process.once("SIGTERM", onSigint);
  // A closed pipe (`| head`) ends the listing quietly.
  process.stdout.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code === "EPIPE") ac.abort();
  });
  const out = new LineWriter();
  try {
    const subjects = subjectsOf(log, flags.subject, flags.node);
    const showMalformed = (err: LogError, raw: { seq: number; subject: string; data: Uint8Array }) => {
      if (flags.json) {
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
          `${String(raw.seq).padStart(8)}  ${"-".padEnd(24)}  ${raw.subject}  MALFORMED  ${err.message}`,
        );
      }
    };
    const showRefused = (r: RefusedEvent) => {
      if (flags.json) {
        out.line(
          JSON.stringify({
            seq: r.seq,
            time: isoTime(r.timeMs),
            timeMs: r.timeMs,
            subject: r.subject,
            kind: r.kind,
            refused: r.reason,
            event: toJson(EventSchema, r.event, { registry }),
          }),
        );
      } else {
        out.line(
          `${String(r.seq).padStart(8)}  ${isoTime(r.timeMs)}  ${r.subject}  REFUSED ${r.kind}  ${r.reason}`,
        );
      }
    };
    for await (const r of log.read({
      ...(flags.fromSeq === undefined ? {} : { fromSeq: flags.fromSeq }),
      ...(flags.untilSeq === undefined ? {} : { untilSeq: flags.untilSeq }),
      ...(subjects.length > 0 ? { subjects } : {}),
      follow: flags.follow === true,
      signal: ac.signal,
      onMalformed: showMalformed,
      onRefused: showRefused,
    })) {
      if (flags.json) {
        out.line(
          JSON.stringify({
            seq: r.seq,
            time: isoTime(r.timeMs),
            timeMs: r.timeMs,
            subject: r.subject,
            kind: r.event.body.case ?? "unknown",
            event: toJson(EventSchema, r.event, { registry }),
          }),
        );
      } else {
        const d = describeEvent(r.event);
        out.line(`${String(r.seq).padStart(8)}  ${isoTime(r.timeMs)}  ${r.subject}  ${d.kind}  ${d.text}`);
      }
      // While following, show each event as it comes; while reading history, batch the writes.
      if (flags.follow) await out.flush();
      else if (out.pending > 256) await out.flush();
    }
    await out.flush();
  } finally {
    process.off("SIGINT", onSigint);
    process.off("SIGTERM", onSigint);
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
