/** `llmgw nats-auth init`: NKEY users per role and the nats-server configuration that permits each its part. */
import { type Command, Option } from "commander";
import { DEFAULT_BUCKETS, NATS_ROLES } from "../../log/index.js";
import { prefixOption, streamOption } from "../common.js";
import { writeNatsAuth } from "../nats-auth-files.js";

interface InitFlags {
  dir: string;
  stream: string;
  subjectPrefix: string;
  leaseBucket: string;
  gatewaysBucket: string;
  endpointsBucket: string;
  snapshotBucket: string;
  revokedBucket: string;
  force?: boolean;
  keepExisting?: boolean;
}

export function registerNatsAuth(program: Command): void {
  const group = program
    .command("nats-auth")
    .description("NATS credentials per role (gateway, reconciler, api, reader, router) with least privilege");
  const bucket = (flag: string, what: string, def: string) =>
    new Option(`${flag} <name>`, `KV bucket ${what}`).default(def);
  group
    .command("init")
    .description(
      "write the server's auth config (auth.conf, to include) and one NKEY seed file <role>.nk per role",
    )
    .requiredOption("--dir <dir>", "directory to write auth.conf and the .nk seed files into")
    .addOption(streamOption())
    .addOption(prefixOption())
    .addOption(bucket("--lease-bucket", "of the reconciler's leader lease", DEFAULT_BUCKETS.leases))
    .addOption(bucket("--gateways-bucket", "of the gateways' leases", DEFAULT_BUCKETS.gateways))
    .addOption(bucket("--endpoints-bucket", "of the routing table", DEFAULT_BUCKETS.endpoints))
    .addOption(bucket("--snapshot-bucket", "of projection snapshots", DEFAULT_BUCKETS.snapshots))
    .addOption(bucket("--revoked-bucket", "of revoked agent identities", DEFAULT_BUCKETS.revoked))
    .option("--force", "replace existing files (new keys: every process needs its new .nk file)")
    .option(
      "--keep-existing",
      "when every file is there already, keep them and succeed (a start-up step run on each start)",
    )
    .addHelpText(
      "after",
      "\nFiles (in --dir):\n" +
        "  auth.conf        nats-server `authorization` block: one NKEY user per role (public keys only)\n" +
        "  <role>.nk        the role's NKEY seed, mode 0600: --nats-creds of the processes of that role\n" +
        "                   (and nats --nkey for NATS's own tool; a seed, not a JWT .creds file)\n" +
        "  A <role>.creds seed file of an earlier version is renamed to <role>.nk, keeping its key.\n" +
        `Roles: ${NATS_ROLES.join(", ")}. What each may do: docs/SECURITY.md, "NATS credentials".`,
    )
    .action((flags: InitFlags) => {
      const files = writeNatsAuth(
        flags.dir,
        {
          stream: flags.stream,
          prefix: flags.subjectPrefix,
          buckets: {
            leases: flags.leaseBucket,
            gateways: flags.gatewaysBucket,
            endpoints: flags.endpointsBucket,
            snapshots: flags.snapshotBucket,
            revoked: flags.revokedBucket,
          },
        },
        { force: flags.force === true, keepExisting: flags.keepExisting === true },
      );
      const out = (line: string) => process.stdout.write(`${line}\n`);
      for (const f of files.renamed) out(`renamed the seed file of an earlier version to ${f}`);
      if (!files.written) out(`kept the existing files in ${flags.dir}`);
      out(`server config  ${files.serverConfig}  (include it from nats-server.conf)`);
      for (const role of NATS_ROLES) out(`${role.padEnd(14)} ${files.nkeys[role]}`);
    });
}
