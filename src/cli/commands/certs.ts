import type { Command } from "commander";
import { certsLayout, createCerts, invalidNodeIdReason, nodeIds, OpensslError } from "../../sim/index.js";
import { CliError, EXIT, intArg } from "../common.js";

export const DEFAULT_CERTS_DIR = ".data/certs";

export function registerCerts(program: Command): void {
  program
    .command("certs")
    .description("create development certificates (CA, gateway, nodes) with openssl")
    .option("--out <dir>", "output directory", DEFAULT_CERTS_DIR)
    .option("--nodes <n>", "node certificates for <prefix>1..<prefix>N (default 4)", intArg("--nodes"))
    .option("--node-prefix <prefix>", "node id prefix, as for `llmgw sim`", "node-")
    .option("--node <ids>", "explicit node ids, comma-separated (repeatable)", collect)
    .option(
      "--gateway-host <hosts>",
      "extra gateway host names or IPs, comma-separated (repeatable)",
      collect,
    )
    .option("--force", "re-issue the gateway and node certificates (the CA is kept)")
    .option("--days <n>", "validity of the gateway and node certificates", intArg("--days"), 825)
    .addHelpText(
      "after",
      "\nFiles (in --out):\n" +
        "  ca.pem, ca-key.pem                  the development CA (reused when present)\n" +
        "  gateway.pem, gateway-key.pem        server certificate: localhost, 127.0.0.1, ::1 and --gateway-host\n" +
        "  nodes/<id>.pem, nodes/<id>-key.pem  client certificate per node, CN = node id\n" +
        "Existing certificates issued by the CA are kept unless --force.",
    )
    .action(async (opts: CertsFlags) => {
      const ids = [...(opts.node ?? [])];
      // Explicit --node ids alone mean only those; --nodes adds a numbered range (default 4 when neither is given).
      if (opts.nodes !== undefined || ids.length === 0)
        ids.push(...nodeIds(opts.nodes ?? 4, opts.nodePrefix));
      for (const id of ids) {
        const why = invalidNodeIdReason(id);
        if (why) throw new CliError(`invalid --node/--node-prefix: ${why}`);
      }
      let report: Awaited<ReturnType<typeof createCerts>>;
      try {
        report = await createCerts({
          out: opts.out,
          nodes: ids,
          gatewayHosts: opts.gatewayHost ?? [],
          force: opts.force === true,
          days: opts.days,
        });
      } catch (err) {
        if (err instanceof OpensslError) throw new CliError(err.message, EXIT.failure);
        throw err;
      }
      const files = certsLayout(opts.out);
      const counts = { created: 0, kept: 0, reissued: 0 };
      for (const a of Object.values(report.nodes)) counts[a]++;
      const out = (line: string) => process.stdout.write(`${line}\n`);
      out(`CA       ${report.ca.padEnd(8)} ${files.ca}`);
      out(`gateway  ${report.gateway.padEnd(8)} ${files.gatewayCert}`);
      out(
        `nodes    ${ids.length} in ${files.nodesDir}: ${counts.created} created, ${counts.kept} kept, ${counts.reissued} reissued`,
      );
      for (const w of report.warnings) process.stderr.write(`llmgw certs: ${w}\n`);
    });
}

interface CertsFlags {
  out: string;
  nodes?: number;
  nodePrefix: string;
  node?: string[];
  gatewayHost?: string[];
  force?: boolean;
  days: number;
}

function collect(value: string, previous: string[] | undefined): string[] {
  return [
    ...(previous ?? []),
    ...value
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s.length > 0),
  ];
}
