import { spawn } from "node:child_process";
import { join } from "node:path";

export const LLMGW_BIN = join(import.meta.dirname, "../../bin/llmgw.js");

/** `--nats … --stream … --subject-prefix …`: the flags that point an `llmgw` command at one log. */
export function logFlags(nats: string, stream: string, prefix: string): string[] {
  return ["--nats", nats, "--stream", stream, "--subject-prefix", prefix];
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the real `llmgw` command as a child process and collects its output. */
export function runCli(
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; input?: string } = {},
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [LLMGW_BIN, ...args], {
      env: { ...process.env, ...opts.env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (b) => (stdout += b));
    child.stderr.on("data", (b) => (stderr += b));
    const timer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs ?? 60_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(opts.input ?? "");
  });
}

/** `llmgw check-log` over one stream (with the agents' acks file when given). */
export function runCheckLog(o: {
  nats: string;
  stream: string;
  prefix: string;
  acked?: string;
}): Promise<CliResult> {
  const args = ["check-log", ...logFlags(o.nats, o.stream, o.prefix)];
  if (o.acked !== undefined) args.push("--acked", o.acked);
  return runCli(args, { timeoutMs: 120_000 });
}
