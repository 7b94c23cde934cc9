/**
 * Starts the bare Connect server (echo-server.ts) as a child process: the
 * transport's own limit that fan-in and ingest measure the gateway against.
 */
import { type Child, spawnScript } from "../../test/harness/proc.js";

export interface BareConnectServer {
  readonly child: Child;
  readonly url: string;
}

export async function startBareConnectServer(): Promise<BareConnectServer> {
  const child = spawnScript(new URL("./echo-server.ts", import.meta.url).pathname, []);
  try {
    const port = await new Promise<number>((resolve, reject) => {
      child.proc.once("message", (m) => resolve((m as { port: number }).port));
      void child.exited.then((c) => reject(new Error(`bare Connect server exited ${c}:\n${child.output()}`)));
    });
    return { child, url: `http://127.0.0.1:${port}` };
  } catch (err) {
    await child.stop();
    throw err;
  }
}
