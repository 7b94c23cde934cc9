/**
 * `--archive WHERE` (env LLMGW_ARCHIVE): where the log's archive is, for
 * the archiver that writes it and every command that reads the log.
 *   nats                  the Object Store bucket `<stream>-archive` of the same NATS (default)
 *   nats:BUCKET           another Object Store bucket of the same NATS
 *   dir:PATH              a directory (a volume, or a folder a backup tool copies)
 *   s3://BUCKET/PREFIX    an S3-compatible object store, with --archive-s3-endpoint,
 *                         --archive-s3-region and --archive-s3-path-style; credentials
 *                         from the AWS SDK's default chain (AWS_* variables, profile, role)
 */
import { type Command, Option } from "commander";
import type { ArchiveLocation } from "../log/index.js";
import { CliError } from "./common.js";

export const ARCHIVE_HELP =
  "where the log's archive is: nats (the Object Store bucket <stream>-archive of the same NATS), nats:BUCKET, dir:PATH (a directory), " +
  "or s3://BUCKET/PREFIX (an S3-compatible store; credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or the role)";

/** The archive flags as commander hands them over. */
export interface ArchiveFlags {
  archive?: string;
  archiveS3Endpoint?: string;
  archiveS3Region?: string;
  archiveS3PathStyle?: boolean;
}

export function archiveOption(): Option {
  return new Option("--archive <where>", ARCHIVE_HELP).env("LLMGW_ARCHIVE").default("nats");
}

/** `--archive` and the S3 settings that go with it, added to `cmd`. */
export function withArchiveOptions<C extends Command>(cmd: C): C {
  cmd
    .addOption(archiveOption())
    .addOption(archiveS3EndpointOption())
    .addOption(archiveS3RegionOption())
    .addOption(archiveS3PathStyleOption());
  return cmd;
}

export function archiveS3EndpointOption(): Option {
  return new Option(
    "--archive-s3-endpoint <url>",
    "with --archive s3://…: the endpoint of an S3-compatible store (MinIO, Ceph RGW…), e.g. http://minio:9000 (default: AWS S3 of the region)",
  ).env("LLMGW_ARCHIVE_S3_ENDPOINT");
}

export function archiveS3RegionOption(): Option {
  return new Option(
    "--archive-s3-region <region>",
    "with --archive s3://…: the bucket's region (default: AWS_REGION or the profile's; us-east-1 with --archive-s3-endpoint)",
  ).env("LLMGW_ARCHIVE_S3_REGION");
}

export function archiveS3PathStyleOption(): Option {
  return new Option(
    "--archive-s3-path-style",
    "with --archive s3://…: address the bucket in the path (ENDPOINT/BUCKET/KEY), as most self-hosted stores need",
  ).env("LLMGW_ARCHIVE_S3_PATH_STYLE");
}

const BUCKET = /^[A-Za-z0-9_-]{1,200}$/;
/** S3 bucket names: 3–63 lowercase letters, digits, '.' and '-', starting and ending with a letter or digit. */
const S3_BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const S3_REGION = /^[a-z0-9-]{1,40}$/;

/** The archive location the archive flags name, or a CliError naming the flag and its forms. */
export function archiveLocation(flags: ArchiveFlags): ArchiveLocation {
  const value = flags.archive;
  const v = (value ?? "nats").trim();
  if (!v.startsWith("s3:")) {
    const s3Flag =
      flags.archiveS3Endpoint !== undefined
        ? "--archive-s3-endpoint"
        : flags.archiveS3Region !== undefined
          ? "--archive-s3-region"
          : flags.archiveS3PathStyle
            ? "--archive-s3-path-style"
            : undefined;
    if (s3Flag) {
      throw new CliError(
        `${s3Flag} (or its LLMGW_ARCHIVE_S3_* variable) is for an archive in S3, and --archive is ${JSON.stringify(v)}: give --archive s3://BUCKET/PREFIX, or leave the S3 settings out`,
      );
    }
  }
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
  if (v.startsWith("s3:")) return s3Location(v, flags);
  throw new CliError(
    `--archive must be nats, nats:BUCKET, dir:PATH or s3://BUCKET/PREFIX, got ${JSON.stringify(value)}`,
  );
}

function s3Location(v: string, flags: ArchiveFlags): ArchiveLocation {
  if (!v.startsWith("s3://")) {
    throw new CliError(
      `--archive for S3 is s3://BUCKET/PREFIX (the prefix may be left out), got ${JSON.stringify(v)}`,
    );
  }
  const rest = v.slice(5);
  const slash = rest.indexOf("/");
  const bucket = slash < 0 ? rest : rest.slice(0, slash);
  const prefix = slash < 0 ? "" : rest.slice(slash + 1).replace(/^\/+|\/+$/g, "");
  if (bucket === "") {
    throw new CliError(`--archive s3://BUCKET/PREFIX names no bucket: got ${JSON.stringify(v)}`);
  }
  if (!S3_BUCKET.test(bucket)) {
    throw new CliError(
      `--archive s3://BUCKET/PREFIX: ${JSON.stringify(bucket)} is not an S3 bucket name (3–63 lowercase letters, digits, '.' and '-', starting and ending with a letter or digit)`,
    );
  }
  const endpoint = flags.archiveS3Endpoint?.trim();
  if (endpoint !== undefined) {
    let url: URL;
    try {
      url = new URL(endpoint);
    } catch {
      throw new CliError(
        `--archive-s3-endpoint must be a URL such as http://minio:9000, got ${JSON.stringify(endpoint)}`,
      );
    }
    if ((url.protocol !== "http:" && url.protocol !== "https:") || url.hostname === "") {
      throw new CliError(
        `--archive-s3-endpoint must be an http:// or https:// URL with a host, got ${JSON.stringify(endpoint)}`,
      );
    }
  }
  const region = flags.archiveS3Region?.trim();
  if (region !== undefined && !S3_REGION.test(region)) {
    throw new CliError(
      `--archive-s3-region must be a region name such as eu-west-1, got ${JSON.stringify(region)}`,
    );
  }
  return {
    kind: "s3",
    s3: {
      bucket,
      prefix,
      ...(endpoint !== undefined ? { endpoint } : {}),
      ...(region !== undefined ? { region } : {}),
      forcePathStyle: flags.archiveS3PathStyle === true,
    },
  };
}
