/**
 * Writes the NATS authentication of a deployment into one directory: the
 * server's `auth.conf` and one `<role>.nk` per role with a fresh NKEY user
 * each: an NKEY seed file, as `nats --nkey` reads it (a `.creds` file is
 * a user JWT and seed; these users have no JWT). Seeds are written mode
 * 0600. Existing files are kept unless `force` (a new run makes new keys:
 * every process then needs its new file).
 *
 * Earlier versions named the seed files `<role>.creds`. Such a file (a seed
 * with no JWT in it) is renamed to `<role>.nk` first, keeping its key, so a
 * deployment's start-up step and `llmgw dev` carry on with the same users.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createUser, fromSeed } from "@nats-io/nkeys";
import {
  formatNkeySeedFile,
  holdsUserJwt,
  NATS_ROLES,
  type NatsLayout,
  type NatsRole,
  NKEY_SEED_EXTENSION,
  renderServerAuth,
} from "../nats-auth/index.js";
import { CliError, EXIT } from "./common.js";

export interface NatsAuthFiles {
  /** The file nats-server includes. */
  serverConfig: string;
  /** Each role's NKEY seed file (`<role>.nk`): `--nats-creds` of that role's processes, `nats --nkey` for NATS's own tool. */
  nkeys: Record<NatsRole, string>;
}

export function natsAuthFiles(dir: string): NatsAuthFiles {
  return {
    serverConfig: join(dir, "auth.conf"),
    nkeys: Object.fromEntries(NATS_ROLES.map((r) => [r, join(dir, `${r}${NKEY_SEED_EXTENSION}`)])) as Record<
      NatsRole,
      string
    >,
  };
}

/**
 * Renames the seed files earlier versions wrote as `<role>.creds` to
 * `<role>.nk` (a `.creds` file holding a JWT is someone else's and stays).
 * Returns the files renamed.
 */
export function renameLegacySeedFiles(dir: string): string[] {
  const renamed: string[] = [];
  const files = natsAuthFiles(dir);
  for (const role of NATS_ROLES) {
    const legacy = join(dir, `${role}.creds`);
    const target = files.nkeys[role];
    if (!existsSync(legacy) || existsSync(target)) continue;
    try {
      if (holdsUserJwt(readFileSync(legacy, "utf8"))) continue;
      renameSync(legacy, target);
    } catch (err) {
      throw new CliError(`cannot rename ${legacy} to ${target}: ${(err as Error).message}`, EXIT.failure);
    }
    renamed.push(target);
  }
  return renamed;
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
): NatsAuthFiles & { written: boolean; renamed: string[] } {
  const renamed = existsSync(dir) ? renameLegacySeedFiles(dir) : [];
  const files = natsAuthFiles(dir);
  const all = [files.serverConfig, ...Object.values(files.nkeys)];
  const present = all.filter((f) => existsSync(f));
  if (!opts.force && opts.keepExisting === true && present.length === all.length) {
    return { ...files, written: false, renamed };
  }
  const missingRoles = NATS_ROLES.filter((r) => !existsSync(files.nkeys[r]));
  if (
    !opts.force &&
    opts.keepExisting === true &&
    existsSync(files.serverConfig) &&
    missingRoles.length > 0 &&
    missingRoles.length < NATS_ROLES.length
  ) {
    // A set from a version with fewer roles: the roles it has keep their keys,
    // the new ones get theirs, and auth.conf lists them all.
    const users = NATS_ROLES.map((role) =>
      missingRoles.includes(role)
        ? { role, publicKey: newUser(files.nkeys[role], role) }
        : { role, publicKey: publicKeyOf(files.nkeys[role]) },
    );
    write(files.serverConfig, renderServerAuth(users, layout), 0o644);
    return { ...files, written: true, renamed };
  }
  if (present.length > 0 && !opts.force) {
    throw new CliError(
      `${present.join(", ")} already exist${present.length === 1 ? "s" : ""}: keeping them (--force writes new keys; every process then needs its new seed file)`,
      EXIT.usage,
    );
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const users = NATS_ROLES.map((role) => ({ role, publicKey: newUser(files.nkeys[role], role) }));
  // Public keys and permissions only: readable by the server's user.
  write(files.serverConfig, renderServerAuth(users, layout), 0o644);
  return { ...files, written: true, renamed };
}

/** Writes a new NKEY user's seed for `role` to `file`; returns its public key. */
function newUser(file: string, role: NatsRole): string {
  const kp = createUser();
  const seed = new TextDecoder().decode(kp.getSeed());
  const publicKey = kp.getPublicKey();
  write(file, formatNkeySeedFile(seed, `llmgw role ${role}, user ${publicKey}`), 0o600);
  return publicKey;
}

/** The public key of the seed in an existing seed file. */
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
