/**
 * The NATS credential and TLS flags turned into what the connection takes,
 * read and checked before any connection is made: a missing, unreadable or
 * garbled file is a usage error naming the flag and the file.
 */
import { existsSync, readFileSync } from "node:fs";
import { DEFAULT_NATS_URL } from "../log/index.js";
import { authenticatorFromCredentials, NatsCredentialsError, type NatsSecurity } from "../nats-auth/index.js";
import { CliError, EXIT, type NatsSecurityFlags } from "./common.js";
import { DEFAULT_DEV_DATA_DIR, devCredsDir } from "./dev/paths.js";
import { natsAuthFiles } from "./nats-auth-files.js";

/**
 * For commands that only read the log: with no credentials given and
 * `--nats` at its default, the reader credentials of `llmgw dev` (run with
 * its default data directory) when they exist, so that `llmgw events` and
 * the like work against the dev fleet without flags. Against a server
 * without authentication the credentials are simply not asked for.
 */
export function readerSecurityFrom(flags: NatsSecurityFlags & { nats: string }): NatsSecurity {
  if (flags.natsCreds === undefined && flags.nats === DEFAULT_NATS_URL) {
    const devReader = natsAuthFiles(devCredsDir(DEFAULT_DEV_DATA_DIR)).nkeys.reader;
    if (existsSync(devReader)) return natsSecurityFrom({ ...flags, natsCreds: devReader });
  }
  return natsSecurityFrom(flags);
}

export function natsSecurityFrom(flags: NatsSecurityFlags): NatsSecurity {
  const security: NatsSecurity = {};
  if (flags.natsCreds !== undefined) {
    const text = readFlagFile("--nats-creds", flags.natsCreds);
    try {
      security.authenticator = authenticatorFromCredentials(text);
    } catch (err) {
      if (err instanceof NatsCredentialsError) {
        throw new CliError(`--nats-creds ${flags.natsCreds}: ${err.message}`, EXIT.usage);
      }
      throw err;
    }
  }
  if ((flags.natsCert === undefined) !== (flags.natsKey === undefined)) {
    throw new CliError("--nats-cert and --nats-key go together: give both or neither", EXIT.usage);
  }
  if (flags.natsCa !== undefined || flags.natsCert !== undefined) {
    security.tls = {
      ...(flags.natsCa !== undefined ? { ca: pem("--nats-ca", flags.natsCa) } : {}),
      ...(flags.natsCert !== undefined ? { cert: pem("--nats-cert", flags.natsCert) } : {}),
      ...(flags.natsKey !== undefined ? { key: pem("--nats-key", flags.natsKey) } : {}),
    };
  }
  return security;
}

function readFlagFile(flag: string, file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch (err) {
    throw new CliError(`${flag} ${file}: ${(err as Error).message}`, EXIT.usage);
  }
}

function pem(flag: string, file: string): string {
  const text = readFlagFile(flag, file);
  if (!text.includes("-----BEGIN ")) throw new CliError(`${flag} ${file}: not a PEM file`, EXIT.usage);
  return text;
}
