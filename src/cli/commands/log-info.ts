/**
 * `llmgw log info [--json]`: where the history is: the stream's first and
 * last sequence and bytes, the archive's extent and bytes, and the
 * snapshot points of the archive.
 */
import type { Command } from "commander";
import type { NatsSecurityFlags } from "../common.js";
import { openLogForReading } from "../read-log.js";
import { withLogOptions } from "./log-options.js";

interface LogInfoFlags extends NatsSecurityFlags {
  nats: string;
  stream: string;
  subjectPrefix: string;
  archive: string;
  json?: boolean;
}

export interface LogInfo {
  stream: { firstSeq: number; lastSeq: number; bytes: number };
  archive: { firstSeq: number; lastSeq: number; bytes: number };
  snapshots: Array<{ seq: number; timeMs: number; bytes: number }>;
}

export function registerLogInfo(program: Command): void {
  const log = program.command("log").description("the log as a whole: where its history is");
  withLogOptions(log.command("info"))
    .description(
      "first and last sequence and bytes of the stream, the archive's extent and bytes, and its snapshot points " +
        "(an empty archive is firstSeq 0, lastSeq 0)",
    )
    .option(
      "--json",
      'one JSON object: {"stream": {firstSeq, lastSeq, bytes}, "archive": {…}, "snapshots": [{seq, timeMs, bytes}]}',
    )
    .action(async (flags: LogInfoFlags) => {
      await runLogInfo(flags);
    });
}

async function runLogInfo(flags: LogInfoFlags): Promise<void> {
  const log = await openLogForReading(flags, "llmgw log info");
  let info: LogInfo;
  try {
    const stream = await log.bounds();
    const extent = await log.archive?.extent({ fresh: true });
    const snapshots = (await log.archive?.snapshots()) ?? [];
    info = {
      stream,
      archive: extent ?? { firstSeq: 0, lastSeq: 0, bytes: 0 },
      snapshots: snapshots.map((s) => ({ seq: s.seq, timeMs: s.timeMs, bytes: s.bytes })),
    };
    if (flags.json) {
      process.stdout.write(`${JSON.stringify(info)}\n`);
      return;
    }
    const where = log.archive?.where ?? "no archive";
    process.stdout.write(
      `stream ${flags.stream}: sequences ${stream.firstSeq}–${stream.lastSeq}, ${stream.bytes} bytes\n` +
        (extent
          ? `archive (${where}): sequences ${extent.firstSeq}–${extent.lastSeq}, ${extent.bytes} bytes\n`
          : `archive (${where}): empty\n`) +
        `snapshots: ${snapshots.length === 0 ? "none" : snapshots.map((s) => s.seq).join(", ")}\n`,
    );
  } finally {
    await log.close();
  }
}
