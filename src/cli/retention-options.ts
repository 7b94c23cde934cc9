/**
 * `--log-max-age DURATION` and `--log-max-bytes SIZE`: the log stream's
 * retention, enforced by the archiver (it purges only what it archived),
 * with the defaults of the growth model (docs/deployment.md, "Sizing").
 */
import { Option } from "commander";
import { parseRetentionAge, parseSize } from "../archiver/index.js";
import { CliError } from "./common.js";

/**
 * A day of history in the live stream: the growth model (docs/PERFORMANCE.md,
 * "Log growth") measures about 2.9 MB per node per day, so 1,000 nodes keep
 * about 2.7 GiB in the stream, and reads of the last day never touch the archive.
 */
export const DEFAULT_LOG_MAX_AGE = "24h";
/**
 * 16 GiB: 80 % of the shipped deployment's 20 GiB NATS volume. At 10,000
 * nodes (about 27 GiB a day) this binds first, at about fourteen hours.
 */
export const DEFAULT_LOG_MAX_BYTES = "16GiB";

function parsedAge(text: string): number {
  const r = parseRetentionAge(text);
  if ("error" in r) throw new Error(r.error);
  return r.ms;
}

function parsedSize(text: string): number {
  const r = parseSize(text);
  if ("error" in r) throw new Error(r.error);
  return r.bytes;
}

export function logMaxAgeOption(): Option {
  return (
    new Option(
      "--log-max-age <duration>",
      "events older than this leave the log stream once archived (20s, 36h, 7d; 0: no age limit)",
    )
      .env("LLMGW_LOG_MAX_AGE")
      // Commander hands a default over as it is: the parsed value, shown as written.
      .default(parsedAge(DEFAULT_LOG_MAX_AGE), DEFAULT_LOG_MAX_AGE)
      .argParser((v: string) => {
        const r = parseRetentionAge(v);
        if ("error" in r) throw new CliError(`invalid --log-max-age: ${r.error}`);
        return r.ms;
      })
  );
}

export function logMaxBytesOption(): Option {
  return new Option(
    "--log-max-bytes <size>",
    "the oldest archived events leave the log stream while it is larger than this (512MiB, 20GiB; 0: no size limit)",
  )
    .env("LLMGW_LOG_MAX_BYTES")
    .default(parsedSize(DEFAULT_LOG_MAX_BYTES), DEFAULT_LOG_MAX_BYTES)
    .argParser((v: string) => {
      const r = parseSize(v);
      if ("error" in r) throw new CliError(`invalid --log-max-bytes: ${r.error}`);
      return r.bytes;
    });
}

export function segmentBytesOption(def: number): Option {
  return new Option(
    "--archive-segment-bytes <size>",
    "an archive segment is sealed at this size, or after a quarter of --log-max-age, whichever comes first",
  )
    .env("LLMGW_ARCHIVE_SEGMENT_BYTES")
    .default(def, `${def / 2 ** 20}MiB`)
    .argParser((v: string) => {
      const r = parseSize(v);
      if ("error" in r || r.bytes < 1) {
        throw new CliError(`invalid --archive-segment-bytes: ${"error" in r ? r.error : "must be positive"}`);
      }
      return r.bytes;
    });
}
