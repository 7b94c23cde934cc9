/**
 * `llmgw backup --out FILE|DIR` and `llmgw restore --in FILE|DIR`: the
 * whole history of a log (archive, stream, the revocation bucket),
 * consistent at one sequence, and rebuilt into an empty NATS
 * (docs/history.md, "Backup and restore").
 */
import { existsSync, statSync } from "node:fs";
import { type Command, Option } from "commander";
import {
  BundleFileReader,
  BundleFileWriter,
  backupLog,
  MANIFEST,
  readManifest,
  restoreLog,
  targetHolds,
} from "../../archiver/index.js";
import { type ArchiveStore, DirectoryArchiveStore, defaultArchiveBucket, openLog } from "../../log/index.js";
import { DEFAULT_BUCKETS } from "../../nats-auth/index.js";
import { archiveLocation, withArchiveOptions } from "../archive-option.js";
import {
  CliError,
  EXIT,
  type NatsSecurityFlags,
  streamReplicasOption,
  withLogLocationOptions,
  withNatsOptions,
} from "../common.js";
import { natsSecurityFrom } from "../nats-security.js";
import { openLogForReading } from "../read-log.js";

interface BackupFlags extends NatsSecurityFlags {
  nats: string;
  stream: string;
  subjectPrefix: string;
  archive: string;
  out: string;
  revokedBucket: string;
}

interface RestoreFlags extends NatsSecurityFlags {
  nats: string;
  stream?: string;
  archive: string;
  in: string;
  force?: boolean;
  streamReplicas: number;
}

const revokedBucketOption = () =>
  new Option("--revoked-bucket <name>", "KV bucket of revoked agent identities, copied with the log")
    .env("LLMGW_REVOKED_BUCKET")
    .default(DEFAULT_BUCKETS.revoked);

export function registerBackup(program: Command): void {
  withArchiveOptions(withLogLocationOptions(program.command("backup")))
    .description(
      "write the whole history of the log (archive + stream + the revocation bucket), consistent at the stream's last sequence, " +
        "to a new or empty directory, or to one new file when --out ends in .llmgw-backup",
    )
    .addOption(revokedBucketOption())
    .requiredOption(
      "--out <file|dir>",
      "where the backup goes: a new or empty directory, or a new file NAME.llmgw-backup",
    )
    .action(async (flags: BackupFlags) => {
      await runBackup(flags);
    });

  withArchiveOptions(withNatsOptions(program.command("restore")))
    .description(
      "rebuild a backup into the NATS of --nats: the archive, the stream (starting after the backup's last sequence) and the buckets; " +
        "refuses a NATS whose log or archive holds anything unless --force",
    )
    .addOption(
      new Option("--stream <name>", "stream to restore into (default: the backup's)").env("LLMGW_STREAM"),
    )
    .addOption(streamReplicasOption())
    .requiredOption("--in <file|dir>", "the backup: a directory or a file written by llmgw backup")
    .option("--force", "remove the stream, the archive bucket and the buckets there first, then restore")
    .action(async (flags: RestoreFlags) => {
      await runRestore(flags);
    });
}

function isDirectoryTarget(path: string): boolean {
  if (existsSync(path)) return statSync(path).isDirectory();
  return !path.endsWith(".llmgw-backup");
}

async function runBackup(flags: BackupFlags): Promise<void> {
  if (existsSync(flags.out) && !statSync(flags.out).isDirectory()) {
    throw new CliError(`--out ${flags.out} exists: a backup file is never overwritten`);
  }
  const out: ArchiveStore = isDirectoryTarget(flags.out)
    ? new DirectoryArchiveStore(flags.out)
    : new BundleFileWriter(flags.out);
  if (
    out instanceof DirectoryArchiveStore &&
    ((await out.list("segments")).length > 0 || (await out.get(MANIFEST)))
  ) {
    throw new CliError(`--out ${flags.out} already holds a backup: give a new or empty directory`);
  }
  const log = await openLogForReading(flags, "llmgw backup");
  const started = performance.now();
  try {
    const m = await backupLog(log, out, { buckets: [flags.revokedBucket] });
    const keys = Object.values(m.buckets).reduce((n, b) => n + Object.keys(b).length, 0);
    process.stdout.write(
      `backed up ${m.events} events (sequences ${m.firstSeq}–${m.seq}) in ${m.segments} segments, ${m.snapshots} snapshots, ` +
        `${keys} bucket keys to ${out.where} in ${((performance.now() - started) / 1000).toFixed(1)} s\n`,
    );
  } finally {
    await out.close();
    await log.close();
  }
}

async function runRestore(flags: RestoreFlags): Promise<void> {
  if (!existsSync(flags.in)) throw new CliError(`--in ${flags.in} does not exist`);
  const from: ArchiveStore = statSync(flags.in).isDirectory()
    ? new DirectoryArchiveStore(flags.in)
    : new BundleFileReader(flags.in);
  let manifest: Awaited<ReturnType<typeof readManifest>>;
  try {
    manifest = await readManifest(from);
  } catch (err) {
    await from.close();
    throw new CliError(`--in ${flags.in}: ${(err as Error).message}`);
  }
  const stream = flags.stream ?? manifest.stream;
  const location = archiveLocation(flags);
  const log = await openLog({
    url: flags.nats,
    security: natsSecurityFrom(flags),
    clientName: "llmgw restore",
    name: stream,
    prefix: manifest.prefix,
    ensure: false,
    replicas: flags.streamReplicas,
    archive: location,
  });
  const started = performance.now();
  try {
    const holds = await targetHolds(log);
    if (!flags.force && (holds.streamLastSeq > 0 || holds.archiveObjects > 0)) {
      throw new CliError(
        `${flags.nats} already holds a log in stream ${stream} (last sequence ${holds.streamLastSeq}, ${holds.archiveObjects} archive objects): ` +
          "restore into an empty NATS, or pass --force to remove it first",
        EXIT.failure,
      );
    }
    await restoreLog(log, from, manifest, {
      replicas: flags.streamReplicas,
      force: flags.force === true,
      ...(location.kind === "nats"
        ? { archiveBucketStream: `OBJ_${location.bucket ?? defaultArchiveBucket(stream)}` }
        : {}),
    });
    process.stdout.write(
      `restored ${manifest.events} events (sequences ${manifest.firstSeq}–${manifest.seq}) into stream ${stream} and its archive ` +
        `(${log.archive?.where}); the stream continues at ${manifest.seq + 1}; in ${((performance.now() - started) / 1000).toFixed(1)} s\n`,
    );
  } finally {
    await from.close();
    await log.close();
  }
}
