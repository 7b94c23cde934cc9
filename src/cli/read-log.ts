/**
 * Opening the log from the shared flags: for a process that writes it (the
 * stream created or checked, with its replicas), or for a command that only
 * reads it (the stream is never created or changed, and a missing stream is
 * reported in words that say what to check).
 */
import { isLogError, type Log, openLog } from "../log/index.js";
import { type ArchiveFlags, archiveLocation } from "./archive-option.js";
import { CliError, EXIT, type NatsSecurityFlags } from "./common.js";
import { natsSecurityFrom, readerSecurityFrom } from "./nats-security.js";

export interface LogFlags extends NatsSecurityFlags, ArchiveFlags {
  nats: string;
  stream: string;
  subjectPrefix: string;
}

/**
 * The log of a process that appends to it (`llmgw api`, `llmgw reconciler`).
 * A missing stream is created; an existing one's settings are brought to
 * the flags only with `updateStream` (the API's credentials may, the
 * reconciler's may not).
 */
export function openLogForWriting(
  flags: LogFlags & { streamReplicas: number },
  clientName: string,
  opts: { updateStream: boolean; warn?: (message: string) => void },
): Promise<Log> {
  return openLog({
    url: flags.nats,
    security: natsSecurityFrom(flags),
    clientName,
    name: flags.stream,
    prefix: flags.subjectPrefix,
    replicas: flags.streamReplicas,
    updateStream: opts.updateStream,
    ...(opts.warn ? { warn: opts.warn } : {}),
    archive: archiveLocation(flags),
  });
}

export async function openLogForReading(flags: LogFlags, clientName: string): Promise<Log> {
  const log = await openLog({
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
  try {
    await log.lastSeq();
  } catch (err) {
    await log.close();
    if (isLogError(err, "not-found")) {
      throw new CliError(
        `there is no stream "${flags.stream}" on ${flags.nats}: nothing was logged there yet, or --stream names another stream`,
        EXIT.failure,
      );
    }
    throw err;
  }
  return log;
}
