import { Option } from "commander";
import { DEFAULT_NATS_URL, DEFAULT_PREFIX, DEFAULT_STREAM } from "../log/index.js";

/** Exit codes of the llmgw command. */
export const EXIT = {
  ok: 0,
  /** Something failed while running (the log unreachable, a server error). */
  failure: 1,
  /** Bad usage: an invalid flag, config or argument; or a command not built yet. */
  usage: 2,
} as const;

/** An error the CLI reports as one line, naming what to fix, with an exit code. */
export class CliError extends Error {
  override readonly name = "CliError";
  constructor(
    message: string,
    readonly exitCode: number = EXIT.usage,
  ) {
    super(message);
  }
}

/** `--nats URL` (env LLMGW_NATS_URL): every command that talks to NATS takes it. */
export function natsOption(): Option {
  return new Option(
    "--nats <url>",
    "NATS server URL(s), comma-separated for a cluster; credentials as nats://user:password@host (never printed)",
  )
    .env("LLMGW_NATS_URL")
    .default(DEFAULT_NATS_URL);
}

/** `--stream NAME` (env LLMGW_STREAM): the log's JetStream stream. */
export function streamOption(): Option {
  return new Option("--stream <name>", "JetStream stream holding the log")
    .env("LLMGW_STREAM")
    .default(DEFAULT_STREAM);
}

/** `--subject-prefix P` (env LLMGW_SUBJECT_PREFIX): the log's subjects are P.> */
export function prefixOption(): Option {
  return new Option("--subject-prefix <prefix>", "subject prefix of the log's events")
    .env("LLMGW_SUBJECT_PREFIX")
    .default(DEFAULT_PREFIX);
}

/** `--stream-replicas N` (env LLMGW_STREAM_REPLICAS): 1 in development, 3 in production. */
export function streamReplicasOption(): Option {
  return new Option(
    "--stream-replicas <n>",
    "replicas of the log stream and of the KV buckets beside it, when this process creates them (3 in production)",
  )
    .env("LLMGW_STREAM_REPLICAS")
    .default(1)
    .argParser((v: string) => {
      if (!/^[1-5]$/.test(v))
        throw new CliError(`--stream-replicas must be an integer from 1 to 5, got ${JSON.stringify(v)}`);
      return Number(v);
    });
}

/** Parses a non-negative integer flag, naming the flag when it is not one. */
export function intArg(flag: string) {
  return (value: string): number => {
    if (!/^\d+$/.test(value))
      throw new CliError(`${flag} must be a non-negative integer, got ${JSON.stringify(value)}`);
    return Number(value);
  };
}
