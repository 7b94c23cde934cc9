/**
 * The credentials and TLS material a process presents to NATS. A
 * credentials file is either a decentralised-auth `.creds` file (a user JWT
 * and its nkey seed) or the nkey seed alone, as `llmgw nats-auth init`
 * writes it for an NKEY user of the server's `authorization` block. The
 * text is checked here, before any connection, so a garbled file is
 * reported as such and not as a refused connection.
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

/** The nkey seed written between the markers of a credentials file. */
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
  if (text.includes("BEGIN NATS USER JWT")) {
    // Parsed here, once, rather than by the client's credsAuthenticator at
    // every connect: a broken file is reported before any connection.
    const jwt = JWT_BLOCK.exec(text)?.[1];
    if (jwt === undefined) throw new NatsCredentialsError("its user JWT block is malformed");
    return jwtAuthenticator(jwt, seed);
  }
  return nkeyAuthenticator(seed);
}

/** The text of a credentials file for one NKEY user, as `llmgw nats-auth init` writes it. */
export function formatSeedCredentials(seed: string, comment: string): string {
  return `# ${comment}\n# Keep this file secret: the seed below is the user's private key.\n${SEED_BEGIN}\n${seed}\n${SEED_END}\n`;
}
