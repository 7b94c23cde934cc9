/** What every command that reads the log takes and how it opens the log (read only: nothing is created). */
import type { Command } from "commander";
import { withArchiveOptions } from "../archive-option.js";
import { withLogLocationOptions } from "../common.js";
import { apiAccessOptions } from "./operator-common.js";

export { type LogFlags, openLogForReading } from "../read-log.js";

/** Where the log is (`--nats` and its credentials, `--stream`, `--subject-prefix`) and its archive (`--archive`). */
export function withLogOptions(cmd: Command): Command {
  return withArchiveOptions(withLogLocationOptions(cmd));
}

/** What a command reads the log with: NATS (withLogOptions) or the operator API (`--api`, `--token`, the current context). */
export function withLogOrApiOptions(cmd: Command): Command {
  withLogOptions(cmd);
  for (const o of apiAccessOptions()) cmd.addOption(o);
  return cmd;
}
