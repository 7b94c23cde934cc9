/**
 * Writes the NATS authentication of a deployment into one directory: the
 * server's `auth.conf` and one `<role>.creds` per role with a fresh NKEY
 * user each. Seeds are written mode 0600. Existing files are kept unless
 * `force` (a new run makes new keys: every process then needs its new file).
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createUser, fromSeed } from "@nats-io/nkeys";
import {
  formatSeedCredentials,
  NATS_ROLES,
  type NatsLayout,
  type NatsRole,
  renderServerAuth,
} from "../log/index.js";
import { CliError, EXIT } from "./common.js";

export interface NatsAuthFiles {
  /** The file nats-server includes. */
  serverConfig: string;
  creds: Record<NatsRole, string>;
}

export function natsAuthFiles(dir: string): NatsAuthFiles {
  return {
    serverConfig: join(dir, "auth.conf"),
    creds: Object.fromEntries(NATS_ROLES.map((r) => [r, join(dir, `${r}.creds`)])) as Record<
      NatsRole,
      string
    >,
  };
}

/**
 * Creates the files and says whether it did. Existing files: replaced with
 * `force`; with `keepExisting`, a complete set is kept as it is (a
 * container's start-up step, run again on every start) and a set without
 * the credentials of a role added since gets them (auth.conf rewritten, the
 * other roles' keys kept); otherwise a CliError names them.
 */
export function writeNatsAuth(
  dir: string,
  layout: NatsLayout,
  opts: { force: boolean; keepExisting?: boolean },
): NatsAuthFiles & { written: boolean } {
  const files = natsAuthFiles(dir);
  const all = [files.serverConfig, ...Object.values(files.creds)];
  const present = all.filter((f) => existsSync(f));
  if (!opts.force && opts.keepExisting === true && present.length === all.length) {
    return { ...files, written: false };
  }
  const missingRoles = NATS_ROLES.filter((r) => !existsSync(files.creds[r]));
  if (
    !opts.force &&
    opts.keepExisting === true &&
    existsSync(files.serverConfig) &&
    missingRoles.length > 0
  ) {
    // A set from a version with fewer roles: the roles it has keep their keys,
    // the new ones get theirs, and auth.conf lists them all.
    const users = NATS_ROLES.map((role) =>
      missingRoles.includes(role)
        ? { role, publicKey: newUser(files.creds[role], role) }
        : { role, publicKey: publicKeyOf(files.creds[role]) },
    );
    write(files.serverConfig, renderServerAuth(users, layout), 0o644);
    return { ...files, written: true };
  }
  if (present.length > 0 && !opts.force) {
    throw new CliError(
      `${present.join(", ")} already exist${present.length === 1 ? "s" : ""}: keeping them (--force writes new keys; every process then needs its new credentials)`,
      EXIT.usage,
    );
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const users = NATS_ROLES.map((role) => ({ role, publicKey: newUser(files.creds[role], role) }));
  // Public keys and permissions only: readable by the server's user.
  write(files.serverConfig, renderServerAuth(users, layout), 0o644);
  return { ...files, written: true };
}

/** Writes a new NKEY user's seed for `role` to `file`; returns its public key. */
function newUser(file: string, role: NatsRole): string {
  const kp = createUser();
  const seed = new TextDecoder().decode(kp.getSeed());
  const publicKey = kp.getPublicKey();
  write(file, formatSeedCredentials(seed, `llmgw NATS credentials, role ${role}, user ${publicKey}`), 0o600);
  return publicKey;
}

/** The public key of the seed in an existing credentials file. */
function publicKeyOf(file: string): string {
  let seed: string | undefined;
  try {
    seed = /\bSU[A-Z2-7]{40,}\b/.exec(readFileSync(file, "utf8"))?.[0];
  } catch (err) {
    throw new CliError(`cannot read ${file}: ${(err as Error).message}`, EXIT.failure);
  }
  if (seed === undefined)
    throw new CliError(`${file} holds no NKEY user seed: remove it or use --force`, EXIT.usage);
  return fromSeed(new TextEncoder().encode(seed)).getPublicKey();
}

function write(file: string, text: string, mode: number): void {
  try {
    // writeFileSync's mode applies to a new file only: an existing one is
    // narrowed first, so an old seed file never holds a new seed readable by others.
    if (existsSync(file)) chmodSync(file, mode);
    writeFileSync(file, text, { mode });
  } catch (err) {
    throw new CliError(`cannot write ${file}: ${(err as Error).message}`, EXIT.failure);
  }
}
