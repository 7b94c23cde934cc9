import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import type { LogInfo } from "../../src/cli/commands/log-info.js";

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

export interface CliProcess {
  proc: ChildProcess;
  /** What it has printed on stdout so far. */
  stdout: () => string;
  /** What it has printed on stdout and stderr so far, as it came. */
  output: () => string;
  /** Its exit code, once all it printed is read. */
  exited: Promise<number | null>;
}

/** Starts the real `llmgw` command as a long-running child process; the caller stops it. */
export function startCli(args: string[]): CliProcess {
  const proc = spawn(process.execPath, [LLMGW_BIN, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let output = "";
  proc.stdout?.on("data", (b) => {
    stdout += b;
    output += b;
  });
  proc.stderr?.on("data", (b) => (output += b));
  const exited = new Promise<number | null>((r) => proc.once("close", (code) => r(code)));
  return { proc, stdout: () => stdout, output: () => output, exited };
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

/**
 * `llmgw archiver` over the log (and archive) `flags` name, archiving and
 * purging what is a second old in 2 KiB segments: a test's log is archived
 * within seconds, in several segments. `more` flags go after.
 */
export function quickArchiverArgs(flags: string[], ...more: string[]): string[] {
  return ["archiver", ...flags, "--log-max-age", "1s", "--archive-segment-bytes", "2KiB", ...more];
}

/** What `llmgw log info --json` printed. */
export function parseLogInfo(stdout: string): LogInfo {
  return JSON.parse(stdout) as LogInfo;
}

/** The sequences of the events `llmgw events --json` printed, one event a line. */
export function printedSeqs(stdout: string): number[] {
  return stdout
    .trim()
    .split("\n")
    .map((l) => (JSON.parse(l) as { seq: number }).seq);
}
