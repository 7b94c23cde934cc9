/**
 * A gateway under test: `llmgw gateway` as a child process on loopback,
 * h2c (--insecure-dev) or, given certificate files, mTLS as in production.
 */
import { openLog } from "../../src/log/index.js";
import { freePort } from "../../test/harness/nats.js";
import { type Child, spawnLlmgw, until, waitForPort } from "../../test/harness/proc.js";

export interface BenchGateway {
  readonly child: Child;
  readonly url: string;
  readonly id: string;
}

export interface GatewayTlsFiles {
  cert: string;
  key: string;
  clientCa: string;
}

export async function startGatewayProcess(opts: {
  nats: string;
  stream: string;
  id?: string;
  extraArgs?: string[];
  /** Serve mTLS with these files (as `llmgw certs` writes them) instead of h2c. */
  tls?: GatewayTlsFiles;
}): Promise<BenchGateway> {
  const port = await freePort();
  const id = opts.id ?? `gw-bench-${port}`;
  const child = spawnLlmgw([
    "gateway",
    ...(opts.tls
      ? ["--tls-cert", opts.tls.cert, "--tls-key", opts.tls.key, "--client-ca", opts.tls.clientCa]
      : ["--insecure-dev"]),
    "--id",
    id,
    "--listen",
    `127.0.0.1:${port}`,
    "--nats",
    opts.nats,
    "--stream",
    opts.stream,
    // Benchmark agents all connect from loopback, many streams per connection.
    ...["--max-connections-per-address", "8192", "--max-concurrent-streams", "1000"],
    ...(opts.extraArgs ?? []),
  ]);
  await waitForPort(port, 30_000, child);
  // It listens before it serves: ready once its GatewayStarted is in the log.
  const log = await openLog({ url: opts.nats, clientName: "bench-probe", name: opts.stream, ensure: false });
  try {
    await until(
      async () => ((await log.lastSubjectSeq(log.subjects.gateway(id))) > 0 ? true : undefined),
      30_000,
      `gateway ${id} started`,
    );
  } finally {
    await log.close();
  }
  return { child, url: `${opts.tls ? "https" : "http"}://127.0.0.1:${port}`, id };
}
