/** `llmgw nats-auth init`: NKEY users per role and the nats-server configuration that permits each its part. */
import { readFileSync, writeFileSync } from "node:fs";
import { type Command, Option } from "commander";
import { DEFAULT_BUCKETS, NATS_ROLES, type NatsLayout, type NatsRole } from "../../nats-auth/index.js";
import { CliError, EXIT, prefixOption, streamOption } from "../common.js";
import { writeNatsAuth } from "../nats-auth-files.js";
import { NATS_AUTH_SECRET, renderNatsAuthSecrets, roleSecretName } from "../nats-auth-kubernetes.js";

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

interface KubernetesFlags extends Omit<InitFlags, "keepExisting"> {
  namespace: string;
  out?: string;
}

const layoutOf = (flags: InitFlags | KubernetesFlags): NatsLayout => ({
  stream: flags.stream,
  prefix: flags.subjectPrefix,
  buckets: {
    leases: flags.leaseBucket,
    gateways: flags.gatewaysBucket,
    endpoints: flags.endpointsBucket,
    snapshots: flags.snapshotBucket,
    revoked: flags.revokedBucket,
  },
});

export function registerNatsAuth(program: Command): void {
  const group = program
    .command("nats-auth")
    .description("NATS credentials per role (gateway, reconciler, api, reader, router) with least privilege");
  const bucket = (flag: string, what: string, def: string) =>
    new Option(`${flag} <name>`, `KV bucket ${what}`).default(def);
  const layoutOptions = (cmd: Command): Command =>
    cmd
      .addOption(streamOption())
      .addOption(prefixOption())
      .addOption(bucket("--lease-bucket", "of the reconciler's leader lease", DEFAULT_BUCKETS.leases))
      .addOption(bucket("--gateways-bucket", "of the gateways' leases", DEFAULT_BUCKETS.gateways))
      .addOption(bucket("--endpoints-bucket", "of the routing table", DEFAULT_BUCKETS.endpoints))
      .addOption(bucket("--snapshot-bucket", "of projection snapshots", DEFAULT_BUCKETS.snapshots))
      .addOption(bucket("--revoked-bucket", "of revoked agent identities", DEFAULT_BUCKETS.revoked));
  layoutOptions(
    group
      .command("kubernetes")
      .description(
        "the Kubernetes Secrets of deploy/kubernetes: nats-auth (auth.conf) and llmgw-nats-<role> (<role>.nk)",
      )
      .requiredOption(
        "--dir <dir>",
        "directory of the keys (as nats-auth init writes it): used when complete, created when empty",
      ),
  )
    .option("--namespace <ns>", "namespace of the Secrets", "llmgw")
    .option("--out <file>", "write the manifests here (mode 0600) instead of standard output")
    .option("--force", "make new keys even when --dir holds some (every process then needs its new Secret)")
    .addHelpText(
      "after",
      "\nOutput: multi-document YAML for kubectl apply -f:\n" +
        `  ${NATS_AUTH_SECRET.padEnd(20)} key auth.conf: the NATS servers' authorization block (public keys only)\n` +
        NATS_ROLES.map((r) => `  ${roleSecretName(r).padEnd(20)} key ${r}.nk: the seed of role ${r}`).join(
          "\n",
        ) +
        "\nThe seeds are secrets: keep --dir (or the output) where only the deployment's owners read it.\n" +
        "An external NATS (overlay external-nats): include auth.conf in that server's configuration.",
    )
    .action((flags: KubernetesFlags) => {
      const files = writeNatsAuth(flags.dir, layoutOf(flags), {
        force: flags.force === true,
        keepExisting: flags.force !== true,
      });
      const read = (file: string) => {
        try {
          return readFileSync(file, "utf8");
        } catch (err) {
          throw new CliError(`cannot read ${file}: ${(err as Error).message}`, EXIT.failure);
        }
      };
      const seeds = Object.fromEntries(NATS_ROLES.map((r) => [r, read(files.nkeys[r])])) as Record<
        NatsRole,
        string
      >;
      const yaml = renderNatsAuthSecrets({ serverConfig: read(files.serverConfig), seeds }, flags.namespace);
      if (flags.out === undefined) {
        process.stdout.write(yaml);
        return;
      }
      try {
        writeFileSync(flags.out, yaml, { mode: 0o600 });
      } catch (err) {
        throw new CliError(`--out ${flags.out}: ${(err as Error).message}`, EXIT.failure);
      }
      process.stderr.write(
        `${files.written ? "new keys in" : "the keys of"} ${flags.dir}; Secrets in ${flags.out}\n`,
      );
    });
  layoutOptions(
    group
      .command("init")
      .description(
        "write the server's auth config (auth.conf, to include) and one NKEY seed file <role>.nk per role",
      )
      .requiredOption("--dir <dir>", "directory to write auth.conf and the .nk seed files into"),
  )
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
      const files = writeNatsAuth(flags.dir, layoutOf(flags), {
        force: flags.force === true,
        keepExisting: flags.keepExisting === true,
      });
      const out = (line: string) => process.stdout.write(`${line}\n`);
      for (const f of files.renamed) out(`renamed the seed file of an earlier version to ${f}`);
      if (!files.written) out(`kept the existing files in ${flags.dir}`);
      out(`server config  ${files.serverConfig}  (include it from nats-server.conf)`);
      for (const role of NATS_ROLES) out(`${role.padEnd(14)} ${files.nkeys[role]}`);
    });
}
