import { type Command, Option } from "commander";
import { DEFAULT_NATS_URL, DEFAULT_PREFIX, DEFAULT_STREAM } from "../log/index.js";
import { DEFAULT_SNAPSHOT_BUCKET } from "../projections/runtime/index.js";

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

/** The NATS flags beyond the URL (files; every one optional). */
export interface NatsSecurityFlags {
  natsCreds?: string;
  natsCa?: string;
  natsCert?: string;
  natsKey?: string;
}

/**
 * `--nats-creds FILE` and TLS to NATS (`--nats-ca`, `--nats-cert`,
 * `--nats-key`), with their LLMGW_NATS_* envs: what a process presents to a
 * server with authentication on (docs/SECURITY.md, "NATS credentials").
 */
export function natsSecurityOptions(): Option[] {
  return [
    new Option(
      "--nats-creds <file>",
      "NATS credentials of this process's role: its NKEY seed file (<role>.nk, written by llmgw nats-auth init) or a user JWT .creds file",
    ).env("LLMGW_NATS_CREDS"),
    new Option("--nats-ca <file>", "CA that signs the NATS server's certificate (PEM): TLS to NATS").env(
      "LLMGW_NATS_CA",
    ),
    new Option("--nats-cert <file>", "client certificate for NATS (PEM), with --nats-key").env(
      "LLMGW_NATS_CERT",
    ),
    new Option("--nats-key <file>", "key of --nats-cert (PEM)").env("LLMGW_NATS_KEY"),
  ];
}

/** Adds `--nats` and the NATS credential and TLS flags to `cmd`. */
export function withNatsOptions(cmd: Command): Command {
  cmd.addOption(natsOption());
  for (const o of natsSecurityOptions()) cmd.addOption(o);
  return cmd;
}

/** The NATS options (`--nats` and its credentials) and where the log is on it: `--stream`, `--subject-prefix`. */
export function withLogLocationOptions(cmd: Command): Command {
  return withNatsOptions(cmd).addOption(streamOption()).addOption(prefixOption());
}

/** withLogLocationOptions and `--stream-replicas`: what a process that appends to the log (and may create its stream) takes. */
export function withLogWriterOptions(cmd: Command): Command {
  return withLogLocationOptions(cmd).addOption(streamReplicasOption());
}

/**
 * `--snapshot-bucket NAME` (env LLMGW_SNAPSHOT_BUCKET): the KV bucket of
 * projection snapshots, which the reconciler writes and the API and replay read.
 */
export function snapshotBucketOption(): Option {
  return new Option("--snapshot-bucket <name>", "KV bucket of projection snapshots")
    .env("LLMGW_SNAPSHOT_BUCKET")
    .default(DEFAULT_SNAPSHOT_BUCKET);
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

/**
 * A non-negative integer flag with its env and default; `unit: "ms"` marks a
 * duration in the placeholder and the help text.
 */
export function intOption(
  flag: string,
  envVar: string,
  what: string,
  def: number,
  unit: "n" | "ms" = "n",
): Option {
  return new Option(`${flag} <${unit}>`, unit === "ms" ? `${what} (ms)` : what)
    .env(envVar)
    .default(def)
    .argParser(intArg(flag));
}

/**
 * `--max-connections` and `--max-connections-per-address` of a listener
 * guarded by src/connection-guard, with envs `<envPrefix>MAX_CONNECTIONS…`.
 */
export function connectionCapOptions(
  envPrefix: string,
  defaultTotal: number,
): [total: Option, perAddress: Option] {
  return [
    intOption(
      "--max-connections",
      `${envPrefix}MAX_CONNECTIONS`,
      "connections open at once (default 4096, lowered below the file-descriptor limit)",
      defaultTotal,
    ),
    intOption(
      "--max-connections-per-address",
      `${envPrefix}MAX_CONNECTIONS_PER_ADDRESS`,
      "connections open at once from one address",
      256,
    ),
  ];
}

/** Parses a non-negative integer flag, naming the flag when it is not one. */
export function intArg(flag: string) {
  return (value: string): number => {
    if (!/^\d+$/.test(value))
      throw new CliError(`${flag} must be a non-negative integer, got ${JSON.stringify(value)}`);
    return Number(value);
  };
}
