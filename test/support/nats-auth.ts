/**
 * Per-role NATS credentials as the security tests use them: the set
 * `llmgw nats-auth init` writes into a dir (one `<role>.nk` each and the
 * server's `auth.conf`), and the log opened in the test's own process with
 * one role's credentials.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type Log, openLog } from "../../src/log/index.js";
import { authenticatorFromCredentials } from "../../src/nats-auth/index.js";
import { type CliResult, runCli } from "./cli.js";

/** `llmgw nats-auth init --dir <dir>` for a log's stream and subject prefix, `args` after; it must succeed. */
export async function natsAuthInit(
  dir: string,
  stream: string,
  prefix: string,
  args: string[] = [],
): Promise<CliResult> {
  const init = await runCli([
    ...["nats-auth", "init", "--dir", dir, "--stream", stream, "--subject-prefix", prefix],
    ...args,
  ]);
  assert.equal(init.code, 0, init.stderr);
  return init;
}

/** A role's credentials file in a `nats-auth init` dir. */
export const credsFile = (dir: string, role: string): string => join(dir, `${role}.nk`);

/** A role's credentials as the log's authenticator. */
export const roleAuthenticator = (dir: string, role: string) =>
  authenticatorFromCredentials(readFileSync(credsFile(dir, role), "utf8"));

/** The roles that may create no consumer: they read with direct gets, as their commands do. */
const GET_ONLY_ROLES = new Set(["reader", "router"]);

/**
 * The log opened in this process with `role`'s credentials from `dir`; with
 * `ensure`, the stream is created (the API's credentials may), else only
 * opened. The reader and router read with direct gets.
 */
export function openLogAs(o: {
  url: string;
  dir: string;
  stream: string;
  prefix: string;
  role: string;
  ensure: boolean;
}): Promise<Log> {
  return openLog({
    url: o.url,
    clientName: `test ${o.role}`,
    name: o.stream,
    prefix: o.prefix,
    ensure: o.ensure,
    security: { authenticator: roleAuthenticator(o.dir, o.role) },
    ...(GET_ONLY_ROLES.has(o.role) ? { readVia: "direct" as const } : {}),
  });
}
