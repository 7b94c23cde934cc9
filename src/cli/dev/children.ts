/**
 * The child processes of `llmgw dev`: each one's output goes to its own log
 * file, and they stop in the reverse order of starting (the fleet first, NATS
 * last), each with SIGTERM and a deadline before SIGKILL.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, type WriteStream } from "node:fs";
import { join } from "node:path";

export interface Child {
  name: string;
  proc: ChildProcess;
  logFile: string;
  /** Resolves with the exit code (or signal name) when the process ends. */
  exited: Promise<number | string>;
}

export class Children {
  readonly #children: Child[] = [];
  #stopping = false;

  constructor(
    private readonly logDir: string,
    /** Called when a child ends while nobody asked it to. */
    private readonly onUnexpectedExit: (c: Child, code: number | string) => void,
  ) {}

  get list(): readonly Child[] {
    return this.#children;
  }

  start(name: string, command: string, args: string[], env: NodeJS.ProcessEnv = {}): Child {
    const logFile = join(this.logDir, `${name}.log`);
    const out: WriteStream = createWriteStream(logFile, { flags: "a" });
    const proc = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
    proc.stdout?.pipe(out, { end: false });
    proc.stderr?.pipe(out, { end: false });
    const exited = new Promise<number | string>((resolve) => {
      proc.once("exit", (code, signal) => {
        out.end();
        resolve(code ?? signal ?? "unknown");
      });
    });
    const child: Child = { name, proc, logFile, exited };
    void exited.then((code) => {
      if (!this.#stopping) this.onUnexpectedExit(child, code);
    });
    this.#children.push(child);
    return child;
  }

  /** Stops every child, newest first; SIGKILL after `deadlineMs` each. */
  async stopAll(deadlineMs = 15_000): Promise<void> {
    this.#stopping = true;
    for (const c of [...this.#children].reverse()) {
      if (c.proc.exitCode !== null || c.proc.signalCode !== null) continue;
      c.proc.kill("SIGTERM");
      const timer = setTimeout(() => c.proc.kill("SIGKILL"), deadlineMs);
      await c.exited;
      clearTimeout(timer);
    }
  }
}
