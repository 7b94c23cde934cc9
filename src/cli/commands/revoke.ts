/**
 * `llmgw revoke CN` and `llmgw unrevoke CN`: keep an agent certificate out
 * of every gateway, or let it back in. They write the revocation bucket
 * (a KV bucket beside the log) that gateways watch: a revoked agent's open
 * stream closes with PermissionDenied within a second, and its reconnects
 * are refused until the revocation is lifted.
 */
import { type Command, Option } from "commander";
import {
  cnKey,
  DEFAULT_REVOKED_BUCKET,
  invalidCnReason,
  normalizeSerial,
  type Revocation,
  RevocationBucketMissing,
  revocationBucket,
  serialKey,
} from "../../gateway/index.js";
import { connectNats, LogError } from "../../log/index.js";
import { CliError, EXIT, type NatsSecurityFlags, streamReplicasOption, withNatsOptions } from "../common.js";
import { natsSecurityFrom } from "../nats-security.js";
import { safeUser } from "./operator-common.js";

interface RevokeFlags extends NatsSecurityFlags {
  nats: string;
  revokedBucket: string;
  streamReplicas: number;
  serial?: string;
  reason?: string;
  json?: boolean;
}

export function registerRevocation(program: Command): void {
  withBucketOptions(
    program
      .command("revoke")
      .description(
        "revoke an agent certificate: every gateway closes its stream (PermissionDenied) and refuses it until unrevoked",
      )
      .argument("<cn>", "the certificate's CN, i.e. the node id (a DNS name)")
      .option("--serial <hex>", "revoke only the certificate with this serial number (hex, colons allowed)")
      .option("--reason <text>", "why, told to the agent and kept in the bucket"),
  ).action(async (cn: string, flags: RevokeFlags) => {
    const key = keyFor(cn, flags.serial);
    const entry: Revocation = {
      cn,
      ...(flags.serial !== undefined ? { serial: normalizeSerial(flags.serial) ?? flags.serial } : {}),
      reason: flags.reason ?? "",
      revokedAtMs: Date.now(),
      by: safeUser(),
    };
    if (entry.reason.length > 1024) throw new CliError("--reason is longer than 1024 characters");
    const revision = await withBucket(flags, "llmgw revoke", (kv) => kv.put(key, JSON.stringify(entry)));
    if (flags.json) {
      process.stdout.write(`${JSON.stringify({ key, revision, ...entry })}\n`);
      return;
    }
    process.stdout.write(
      `revoked ${describe(cn, entry.serial)} (key ${key} in ${flags.revokedBucket}); gateways close its streams and refuse it\n`,
    );
  });

  withBucketOptions(
    program
      .command("unrevoke")
      .description("lift a revocation: the agent certificate may connect again")
      .argument("<cn>", "the certificate's CN, i.e. the node id (a DNS name)")
      .option("--serial <hex>", "lift the revocation of this certificate serial instead of the CN's"),
  ).action(async (cn: string, flags: RevokeFlags) => {
    const key = keyFor(cn, flags.serial);
    const was = await withBucket(flags, "llmgw unrevoke", async (kv) => {
      const e = await kv.get(key);
      if (e?.operation !== "PUT") return false;
      await kv.delete(key);
      return true;
    });
    const what = describe(cn, flags.serial === undefined ? undefined : normalizeSerial(flags.serial));
    if (flags.json) {
      process.stdout.write(`${JSON.stringify({ key, lifted: was })}\n`);
      return;
    }
    process.stdout.write(was ? `${what} may connect again\n` : `${what} was not revoked; nothing to do\n`);
  });
}

function withBucketOptions(cmd: Command): Command {
  return withNatsOptions(cmd)
    .addOption(
      new Option("--revoked-bucket <name>", "KV bucket of revoked agent CNs and certificate serials")
        .env("LLMGW_REVOKED_BUCKET")
        .default(DEFAULT_REVOKED_BUCKET),
    )
    .addOption(streamReplicasOption())
    .option("--json", "print JSON for tools");
}

/** The bucket key, or a usage error naming what is wrong with the CN or the serial. */
function keyFor(cn: string, serial: string | undefined): string {
  const why = invalidCnReason(cn);
  if (why) throw new CliError(`invalid <cn>: ${why}`);
  if (serial === undefined) return cnKey(cn);
  try {
    return serialKey(serial);
  } catch (err) {
    throw new CliError(`invalid --serial: ${(err as Error).message}`);
  }
}

async function withBucket<T>(
  flags: RevokeFlags,
  client: string,
  fn: (kv: Awaited<ReturnType<typeof revocationBucket>>) => Promise<T>,
): Promise<T> {
  if (!/^[A-Za-z0-9_-]+$/.test(flags.revokedBucket))
    throw new CliError(
      `--revoked-bucket must be letters, digits, - and _, got ${JSON.stringify(flags.revokedBucket)}`,
    );
  const nc = await connectNats({ url: flags.nats, name: client, security: natsSecurityFrom(flags) });
  try {
    return await fn(await revocationBucket(nc, flags.revokedBucket, flags.streamReplicas));
  } catch (err) {
    if (err instanceof RevocationBucketMissing) throw new CliError(err.message, EXIT.failure);
    if (err instanceof CliError || err instanceof LogError) throw err;
    throw new CliError(
      `${client}: the bucket ${flags.revokedBucket} could not be written: ${(err as Error).message}`,
      EXIT.failure,
    );
  } finally {
    await nc.close();
  }
}

function describe(cn: string, serial: string | undefined): string {
  return serial === undefined ? `CN ${cn}` : `certificate serial ${serial} (CN ${cn})`;
}
