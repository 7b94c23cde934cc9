/** `llmgw dev` as a child process for tests: started on free ports, its output kept, stopped with SIGINT. */
import { type ChildProcess, spawn } from "node:child_process";
import { LLMGW_BIN } from "./cli.js";

export interface DevRun {
  proc: ChildProcess;
  out: () => string;
  apiUrl: string;
  natsUrl: string;
  exited: Promise<number | null>;
}

export async function startDev(dataDir: string, catalog: string, extraArgs: string[] = []): Promise<DevRun> {
  const proc = spawn(
    process.execPath,
    [
      LLMGW_BIN,
      "dev",
      "--data-dir",
      dataDir,
      "--nodes",
      "3",
      "--nats-port",
      "0",
      "--gateway-port",
      "0",
      "--api-port",
      "0",
      "--catalog",
      catalog,
      "--start-delay-ms",
      "300",
      "--summary-ms",
      "500",
      ...extraArgs,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let text = "";
  proc.stdout?.on("data", (b) => (text += b));
  proc.stderr?.on("data", (b) => (text += b));
  const exited = new Promise<number | null>((r) => proc.once("exit", (code) => r(code)));
  const deadline = Date.now() + 120_000;
  for (;;) {
    const api = /API and UI\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(text)?.[1];
    const nats = /NATS\s+(nats:\/\/127\.0\.0\.1:\d+)/.exec(text)?.[1];
    if (api && nats) return { proc, out: () => text, apiUrl: api, natsUrl: nats, exited };
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error(`llmgw dev did not come up:\n${text}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

export async function stopDev(run: DevRun): Promise<number | null> {
  run.proc.kill("SIGINT");
  const timer = setTimeout(() => run.proc.kill("SIGKILL"), 60_000);
  const code = await run.exited;
  clearTimeout(timer);
  return code;
}
