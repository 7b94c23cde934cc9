/**
 * The credentials and TLS material a process presents to NATS. A
 * credentials file is either a decentralised-auth `.creds` file (a user JWT
 * and its nkey seed, as `nsc` writes it and `nats --creds` reads it) or an
 * NKEY seed file (`.nk`, as `llmgw nats-auth init` writes it for an NKEY
 * user of the server's `authorization` block and `nats --nkey` reads it).
 * Which one is decided by the text, not the name. The text is checked
 * here, before any connection, so a garbled file is reported as such and
 * not as a refused connection.
 */
import { fromSeed } from "@nats-io/nkeys";
import {
  type Authenticator,
  jwtAuthenticator,
  nkeyAuthenticator,
  type TlsOptions,
} from "@nats-io/transport-node";

/** What connectNats adds to a connection: how it authenticates and its TLS settings. */
export interface NatsSecurity {
  authenticator?: Authenticator;
  tls?: TlsOptions;
}

/** A credentials file that holds no usable JWT or seed; the message says what is wrong. */
export class NatsCredentialsError extends Error {
  override readonly name = "NatsCredentialsError";
}

const JWT_BLOCK = /-----BEGIN NATS USER JWT-----\s*([A-Za-z0-9_\-.=]+)\s*------?END NATS USER JWT------?/;
/** A user seed: "SU" and 56 base32 characters (the checksum is checked by fromSeed). */
const USER_SEED = /\bSU[A-Z2-7]{56}\b/;

/** The markers around an nkey seed, as NATS's tools write and read them (nsc, `nats --nkey`). */
export const SEED_BEGIN = "-----BEGIN USER NKEY SEED-----";
export const SEED_END = "------END USER NKEY SEED------";

/** The authenticator for the text of a credentials file; throws NatsCredentialsError when there is none in it. */
export function authenticatorFromCredentials(text: string): Authenticator {
  const seedText = USER_SEED.exec(text)?.[0];
  if (seedText === undefined) {
    throw new NatsCredentialsError("holds no NATS user nkey seed (a line starting with SU)");
  }
  const seed = new TextEncoder().encode(seedText);
  try {
    fromSeed(seed);
  } catch (err) {
    throw new NatsCredentialsError(`its nkey seed is not valid: ${(err as Error).message}`);
  }
  if (holdsUserJwt(text)) {
    // Parsed here, once, rather than by the client's credsAuthenticator at
    // every connect: a broken file is reported before any connection.
    const jwt = JWT_BLOCK.exec(text)?.[1];
    if (jwt === undefined) throw new NatsCredentialsError("its user JWT block is malformed");
    return jwtAuthenticator(jwt, seed);
  }
  return nkeyAuthenticator(seed);
}

/** The file name ending of an NKEY seed file (what `nats --nkey` takes); `.creds` is for a user JWT and seed. */
export const NKEY_SEED_EXTENSION = ".nk";

/**
 * The text of an NKEY seed file for one user, as `llmgw nats-auth init`
 * writes it: comment lines (the first says it is a seed), then the seed
 * between NATS's markers, so `nats --nkey FILE` and `--nats-creds FILE` both read it.
 */
export function formatNkeySeedFile(seed: string, comment: string): string {
  return `# NATS NKEY user seed (not a JWT .creds file): ${comment}\n# Use it with nats --nkey FILE or llmgw --nats-creds FILE.\n# Keep this file secret: the seed below is the user's private key.\n${SEED_BEGIN}\n${seed}\n${SEED_END}\n`;
}

/** True when the text holds a user JWT block: a `.creds` file rather than a seed file. */
export function holdsUserJwt(text: string): boolean {
  return text.includes("BEGIN NATS USER JWT");
}
