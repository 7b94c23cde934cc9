/**
 * A gateway under test: `llmgw gateway` as a child process on loopback,
 * h2c (--insecure-dev) or, given certificate files, mTLS as in production.
 */
import { randomBytes } from "node:crypto";
import { type Child, spawnLlmgw } from "../../test/harness/proc.js";

export interface BenchGateway {
  readonly child: Child;
  readonly url: string;
  readonly id: string;
  /** Its Prometheus endpoint (`.../metrics`), when started with --metrics-listen. */
  readonly metricsUrl: string | undefined;
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
  const id = opts.id ?? `gw-bench-${randomBytes(4).toString("hex")}`;
  const child = spawnLlmgw(
    [
      "gateway",
      ...(opts.tls
        ? ["--tls-cert", opts.tls.cert, "--tls-key", opts.tls.key, "--client-ca", opts.tls.clientCa]
        : ["--insecure-dev"]),
      "--id",
      id,
      // Port 0: the gateway binds a port of its own and says which.
      "--listen",
      "127.0.0.1:0",
      "--nats",
      opts.nats,
      "--stream",
      opts.stream,
      // Benchmark agents all connect from loopback, many streams per connection.
      ...["--max-connections-per-address", "8192", "--max-concurrent-streams", "1000"],
      ...(opts.extraArgs ?? []),
    ],
    // At info it logs where it listens ("gateway listening"), once it serves:
    // its GatewayStarted is in the log and its metrics endpoint is up then.
    { LLMGW_LOG_LEVEL: "info" },
  );
  try {
    const line = await child.waitForLine(/"gateway listening"/, 60_000);
    const said = JSON.parse(line) as { url?: string; metrics?: string };
    if (!said.url) throw new Error(`gateway ${id} said it listens, but not where: ${line}`);
    return { child, url: said.url, id, metricsUrl: said.metrics };
  } catch (err) {
    await child.stop();
    throw err;
  }
}
