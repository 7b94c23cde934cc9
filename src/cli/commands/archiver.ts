/**
 * `llmgw archiver`: seals the log into its archive and keeps the stream
 * within its retention (docs/history.md). One per log; it may stop and
 * restart at any time (it resumes from the archive's end).
 */
import { type Command, Option } from "commander";
import { pino } from "pino";
import { collectDefaultMetrics, Registry } from "prom-client";
import { Archiver, archiverMetrics, DEFAULT_SEGMENT_BYTES, sealAfterFor } from "../../archiver/index.js";
import { ConnectionState } from "../../log/index.js";
import { type Readiness, serveRegistry } from "../../metrics-endpoint/index.js";
import { withArchiveOptions } from "../archive-option.js";
import { CliError, EXIT, type NatsSecurityFlags, withLogWriterOptions } from "../common.js";
import { openLogForWriting } from "../read-log.js";
import { logMaxAgeOption, logMaxBytesOption, segmentBytesOption } from "../retention-options.js";

interface ArchiverFlags extends NatsSecurityFlags {
  nats: string;
  stream: string;
  subjectPrefix: string;
  streamReplicas: number;
  archive: string;
  logMaxAge: number;
  logMaxBytes: number;
  archiveSegmentBytes: number;
  logLevel: string;
  metricsListen?: string;
}

export function registerArchiver(program: Command): void {
  withArchiveOptions(withLogWriterOptions(program.command("archiver")))
    .description(
      "copy sealed segments of the log (with a fleet snapshot at each boundary) into the archive, and remove " +
        "from the stream only what is archived and past --log-max-age/--log-max-bytes; run one per log",
    )
    .addOption(logMaxAgeOption())
    .addOption(logMaxBytesOption())
    .addOption(segmentBytesOption(DEFAULT_SEGMENT_BYTES))
    .addOption(
      new Option(
        "--metrics-listen <host:port>",
        "Prometheus /metrics, with the probes /readyz (connected to NATS) and /livez (port 0 picks one)",
      ).env("LLMGW_ARCHIVER_METRICS_LISTEN"),
    )
    .option("--log-level <level>", "pino log level", "info")
    .action(async (flags: ArchiverFlags) => {
      await runArchiver(flags);
    });
}

async function runArchiver(flags: ArchiverFlags): Promise<void> {
  const logger = pino({ level: flags.logLevel, base: { service: "llmgw-archiver" } });
  const log = await openLogForWriting(flags, "llmgw archiver", { updateStream: false });
  const archive = log.archive;
  if (!archive) throw new CliError("the log has no archive configured", EXIT.usage);
  try {
    // A store that cannot be used (no such bucket, no credentials, an endpoint that does not answer)
    // is told before anything starts; once running, the archiver backs off and tries again instead.
    await archive.extent({ fresh: true });
  } catch (err) {
    await log.close();
    throw new CliError(`cannot use the archive (${archive.where}): ${(err as Error).message}`, EXIT.failure);
  }
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  let archiver: Archiver | undefined;
  const metrics = archiverMetrics(registry, () => archiver?.status);
  archiver = new Archiver(log, archive, {
    metrics,
    maxAgeMs: flags.logMaxAge,
    maxBytes: flags.logMaxBytes,
    segmentBytes: flags.archiveSegmentBytes,
    sealAfterMs: sealAfterFor(flags.logMaxAge),
    logger,
  });
  const connection = new ConnectionState(log.nc);
  // Ready: connected to NATS (an archiver away from it archives nothing, but loses nothing either).
  const ready = async (): Promise<Readiness> =>
    connection.up
      ? { ready: true, detail: { archivedSeq: archiver?.status.archivedSeq ?? 0 } }
      : { ready: false, reason: "not connected to NATS" };
  const served =
    flags.metricsListen === undefined ? undefined : await serveRegistry(registry, flags.metricsListen, ready);
  if (served) logger.info({ metrics: served.url }, "metrics listening");
  const ac = new AbortController();
  const stop = () => ac.abort();
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  logger.info(
    {
      where: archive.where,
      maxAgeMs: flags.logMaxAge,
      maxBytes: flags.logMaxBytes,
      segmentBytes: flags.archiveSegmentBytes,
    },
    `archiving stream ${flags.stream} to ${archive.where}`,
  );
  try {
    await archiver.run(ac.signal);
  } catch (err) {
    throw new CliError(`archiver stopped: ${(err as Error).message}`, EXIT.failure);
  } finally {
    process.off("SIGTERM", stop);
    process.off("SIGINT", stop);
    if (served) await new Promise((r) => served.server.close(r));
    await log.close();
  }
}
