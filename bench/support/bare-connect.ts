/**
 * Starts the bare Connect server (echo-server.ts) as a child process: the
 * transport's own limit that fan-in and ingest measure the gateway against.
 */
import { type Child, spawnScript } from "../../test/harness/proc.js";
import type { GatewayTlsFiles } from "./gateway.js";

export interface BareConnectServer {
  readonly child: Child;
  readonly url: string;
}

/** h2c, or mTLS with the gateway's certificate files (client certificates required and verified). */
export async function startBareConnectServer(tls?: GatewayTlsFiles): Promise<BareConnectServer> {
  const args = tls ? [tls.cert, tls.key, tls.clientCa] : [];
  const child = spawnScript(new URL("./echo-server.ts", import.meta.url).pathname, args);
  try {
    const port = await new Promise<number>((resolve, reject) => {
      child.proc.once("message", (m) => resolve((m as { port: number }).port));
      void child.exited.then((c) => reject(new Error(`bare Connect server exited ${c}:\n${child.output()}`)));
    });
    return { child, url: `${tls ? "https" : "http"}://127.0.0.1:${port}` };
  } catch (err) {
    await child.stop();
    throw err;
  }
}
