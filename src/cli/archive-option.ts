/**
 * `--archive WHERE` (env LLMGW_ARCHIVE): where the log's archive is, for
 * the archiver that writes it and every command that reads the log.
 *   nats            the Object Store bucket `<stream>-archive` of the same NATS (default)
 *   nats:BUCKET     another Object Store bucket of the same NATS
 *   dir:PATH        a directory (a volume, or a folder a backup tool copies)
 */
import { Option } from "commander";
import type { ArchiveLocation } from "../log/index.js";
import { CliError } from "./common.js";

export const ARCHIVE_HELP =
  "where the log's archive is: nats (the Object Store bucket <stream>-archive of the same NATS), nats:BUCKET, or dir:PATH (a directory)";

export function archiveOption(): Option {
  return new Option("--archive <where>", ARCHIVE_HELP).env("LLMGW_ARCHIVE").default("nats");
}

const BUCKET = /^[A-Za-z0-9_-]{1,200}$/;

/** The archive location a `--archive` value names, or a CliError naming the forms. */
export function archiveLocation(value: string | undefined): ArchiveLocation {
  const v = (value ?? "nats").trim();
  if (v === "nats") return { kind: "nats" };
  if (v.startsWith("nats:")) {
    const bucket = v.slice(5);
    if (!BUCKET.test(bucket)) {
      throw new CliError(
        `--archive nats:BUCKET needs a bucket name of letters, digits, '-' and '_', got ${JSON.stringify(bucket)}`,
      );
    }
    return { kind: "nats", bucket };
  }
  if (v.startsWith("dir:") && v.length > 4) return { kind: "directory", path: v.slice(4) };
  if (v.startsWith("s3:")) {
    throw new CliError(
      "--archive s3:… is not supported by this build: archive to dir:PATH on a volume your S3 tooling syncs, or keep the default nats",
    );
  }
  throw new CliError(`--archive must be nats, nats:BUCKET or dir:PATH, got ${JSON.stringify(value)}`);
}
