/** `llmgw api` as a real process, for the tests that run it with NATS role credentials. */
import { type ChildProcess, spawn } from "node:child_process";
import { LLMGW_BIN } from "./cli.js";
import { eventually } from "./eventually.js";

export interface ApiProcess {
  proc: ChildProcess;
  url: string;
  output(): string;
}

/** `llmgw api --dev` on a port it picks; resolves with its URL once it serves. */
export async function spawnApi(args: string[]): Promise<ApiProcess> {
  const proc = spawn(process.execPath, [LLMGW_BIN, "api", "--dev", "--listen", "127.0.0.1:0", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  proc.stdout?.on("data", (b) => (out += b));
  proc.stderr?.on("data", (b) => (out += b));
  let url = "";
  try {
    await eventually(
      () => {
        url = /operator API listening on (http:\/\/[^\s"]+)/.exec(out)?.[1] ?? "";
        if (proc.exitCode !== null) throw new Error(`llmgw api exited with ${proc.exitCode}`);
        return url !== "";
      },
      { what: "llmgw api to listen", timeoutMs: 30_000 },
    );
  } catch (err) {
    proc.kill("SIGKILL");
    throw new Error(`${(err as Error).message}:\n${out}`, { cause: err });
  }
  return { proc, url, output: () => out };
}
