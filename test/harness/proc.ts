/**
 * Child processes of a test or a benchmark: llmgw commands and helper
 * scripts, waiting for them to listen, and clean shutdown.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, mkdirSync, type WriteStream } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";

const root = join(import.meta.dirname, "../..");
export const LLMGW_BIN = join(root, "bin/llmgw.js");

const live = new Set<ChildProcess>();
process.on("exit", () => {
  for (const p of live) p.kill("SIGKILL");
});

export interface Child {
  readonly proc: ChildProcess;
  readonly pid: number;
  /** Last lines of stdout and stderr, for failure messages. */
  output(): string;
  /** Resolves with the first stdout/stderr line that matches. */
  waitForLine(re: RegExp, timeoutMs?: number): Promise<string>;
  /** SIGTERM (or `signal`), SIGKILL after `graceMs`; resolves on exit. */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<void>;
  readonly exited: Promise<number | null>;
}

/** `node bin/llmgw.js <args>` as a child process; `bin` runs another version's (test/support/old-release.ts). */
export function spawnLlmgw(args: string[], env: Record<string, string> = {}, bin = LLMGW_BIN): Child {
  return spawnNode([...profileArgs(), bin, ...args], env);
}

/**
 * For profiling the processes under test:
 * - LLMGW_BENCH_CPU_PROF=<dir>: llmgw children write V8 CPU profiles there (on a clean exit);
 * - LLMGW_BENCH_NODE_ARGS="--trace-gc ...": more Node flags for llmgw children
 *   (for the flags NODE_OPTIONS does not take, such as --trace-gc).
 */
function profileArgs(): string[] {
  const dir = process.env["LLMGW_BENCH_CPU_PROF"];
  const extra = (process.env["LLMGW_BENCH_NODE_ARGS"] ?? "").split(/\s+/).filter((a) => a !== "");
  return [...(dir ? ["--cpu-prof", `--cpu-prof-dir=${dir}`] : []), ...extra];
}

/** LLMGW_BENCH_CHILD_OUTPUT=<dir>: every child's whole stdout and stderr go to <dir>/<pid>.log as well. */
function outputFile(pid: number | undefined): WriteStream | undefined {
  const dir = process.env["LLMGW_BENCH_CHILD_OUTPUT"];
  if (!dir || pid === undefined) return undefined;
  mkdirSync(dir, { recursive: true });
  return createWriteStream(join(dir, `${pid}.log`));
}

/** A TypeScript helper script (run through tsx) as a child with an IPC channel. */
export function spawnScript(script: string, args: string[], env: Record<string, string> = {}): Child {
  return spawnNode(["--import", "tsx", script, ...args], env, true);
}

function spawnNode(args: string[], env: Record<string, string>, ipc = false): Child {
  const proc = spawn(process.execPath, args, {
    cwd: root,
    env: { ...process.env, LLMGW_LOG_LEVEL: "warn", ...env },
    stdio: ipc ? ["ignore", "pipe", "pipe", "ipc"] : ["ignore", "pipe", "pipe"],
  });
  live.add(proc);
  const lines: string[] = [];
  const watchers = new Set<(l: string) => void>();
  let partial = "";
  const file = outputFile(proc.pid);
  const onData = (chunk: Buffer) => {
    file?.write(chunk);
    const text = partial + chunk.toString("utf8");
    const parts = text.split("\n");
    partial = parts.pop() ?? "";
    for (const l of parts) {
      lines.push(l);
      if (lines.length > 50) lines.shift();
      for (const w of watchers) w(l);
    }
  };
  proc.stdout?.on("data", onData);
  proc.stderr?.on("data", onData);
  const exited = new Promise<number | null>((resolve) => {
    proc.once("exit", (code) => {
      live.delete(proc);
      file?.end();
      resolve(code);
    });
  });
  const child: Child = {
    proc,
    pid: proc.pid ?? 0,
    exited,
    output: () => lines.join("\n"),
    waitForLine(re, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const found = lines.find((l) => re.test(l));
        if (found !== undefined) return resolve(found);
        const timer = setTimeout(() => {
          watchers.delete(w);
          reject(new Error(`no line matching ${re} within ${timeoutMs} ms; output:\n${child.output()}`));
        }, timeoutMs);
        const w = (l: string) => {
          if (!re.test(l)) return;
          clearTimeout(timer);
          watchers.delete(w);
          resolve(l);
        };
        watchers.add(w);
        void exited.then((code) => {
          if (!watchers.has(w)) return;
          clearTimeout(timer);
          watchers.delete(w);
          reject(
            new Error(`process exited (${code}) before a line matching ${re}; output:\n${child.output()}`),
          );
        });
      });
    },
    async stop(signal = "SIGTERM", graceMs = 10_000) {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill(signal);
      const timer = setTimeout(() => proc.kill("SIGKILL"), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
  return child;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Polls `check` until it returns a value (not undefined) or `timeoutMs` passes. */
export async function until<T>(
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs: number,
  what: string,
  everyMs = 50,
): Promise<T> {
  const end = performance.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (performance.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** Resolves once something accepts TCP connections on the loopback port. */
export async function waitForPort(port: number, timeoutMs: number, child?: Child): Promise<void> {
  const end = performance.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, "127.0.0.1");
      s.once("connect", () => {
        s.destroy();
        resolve(true);
      });
      s.once("error", () => resolve(false));
    });
    if (ok) return;
    if (child && child.proc.exitCode !== null)
      throw new Error(`process exited before listening on ${port}:\n${child.output()}`);
    if (performance.now() > end)
      throw new Error(
        `nothing listening on ${port} after ${timeoutMs} ms${child ? `:\n${child.output()}` : ""}`,
      );
    await sleep(50);
  }
}
