/** What every command that reads the log takes and how it opens the log (read only: nothing is created). */
import type { Command } from "commander";
import { type Log, openLog } from "../../log/index.js";
import { natsOption, prefixOption, streamOption } from "../common.js";

export interface LogFlags {
  nats: string;
  stream: string;
  subjectPrefix: string;
}

export function withLogOptions(cmd: Command): Command {
  return cmd.addOption(natsOption()).addOption(streamOption()).addOption(prefixOption());
}

export function openLogForReading(flags: LogFlags, clientName: string): Promise<Log> {
  return openLog({
    url: flags.nats,
    clientName,
    name: flags.stream,
    prefix: flags.subjectPrefix,
    ensure: false,
  });
}
