/** What every command that reads the log takes and how it opens the log (read only: nothing is created). */
import type { Command } from "commander";
import { type Log, openLog } from "../../log/index.js";
import {
  archiveLocation,
  archiveOption,
  archiveS3EndpointOption,
  archiveS3PathStyleOption,
  archiveS3RegionOption,
} from "../archive-option.js";
import { prefixOption, streamOption, withNatsOptions } from "../common.js";
import { readerSecurityFrom } from "../nats-security.js";
import type { LogFlags } from "../read-log.js";

export type { LogFlags };

export function withLogOptions(cmd: Command): Command {
  return withNatsOptions(cmd)
    .addOption(streamOption())
    .addOption(prefixOption())
    .addOption(archiveOption())
    .addOption(archiveS3EndpointOption())
    .addOption(archiveS3RegionOption())
    .addOption(archiveS3PathStyleOption());
}

export function openLogForReading(flags: LogFlags, clientName: string): Promise<Log> {
  return openLog({
    url: flags.nats,
    security: readerSecurityFrom(flags),
    clientName,
    name: flags.stream,
    prefix: flags.subjectPrefix,
    ensure: false,
    archive: archiveLocation(flags),
    // The reader role may create no consumer: read with direct gets (docs/SECURITY.md, "Consumers").
    readVia: "direct",
  });
}
