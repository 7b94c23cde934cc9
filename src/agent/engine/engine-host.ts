/**
 * What the engine supervisor needs of its machine: engine processes, their
 * identity and signals, ports, and the engines' HTTP (health, metrics, the
 * drain hook). The supervisor's own logic (port reservation, probes,
 * liveness, metrics polling, drains, records, logs) is the same whatever
 * the host: `llmgw agent` runs engines as processes (`osEngineHost`); a
 * host that fakes the processes and their HTTP runs that same logic with
 * nothing spawned.
 */
import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { EXIT_RECORDER, executableOnPath } from "./exit-recorder.js";
import { processStartTime } from "./process-identity.js";

export interface EngineSpawn {
  argv: string[];
  env: NodeJS.ProcessEnv;
  /** The engine's log, open for appending: its stdout and stderr. */
  logFd: number;
  logPath: string;
  /** Where the engine's exit status is recorded, for an agent that is no longer its parent. */
  exitPath: string;
}

export type EngineSpawned =
  | {
      ok: true;
      pid: number;
      /** Called once, when the process exits. */
      onExit(listener: (code: number | null, signal: NodeJS.Signals | null) => void): void;
    }
  | { ok: false; error: string };

export interface EngineHost {
  spawn(o: EngineSpawn): Promise<EngineSpawned>;
  /** Whether `program` is an executable, as exec would find it on `path`. */
  executable(program: string, path: string | undefined): Promise<boolean>;
  /** A process's start time (its identity with its PID); undefined when it does not run. */
  startTime(pid: number): Promise<string | undefined>;
  /** Signals an engine's process group (its workers go with it); a group already gone is no error. */
  signalGroup(pid: number, signal: NodeJS.Signals): void;
  /** Whether nothing listens on `port` (on any address). */
  portFree(port: number): Promise<boolean>;
  /** HTTP to an engine (health, metrics, drain hook). */
  fetch(url: string, init: { method?: string; signal: AbortSignal }): Promise<Response>;
}

/** Engines as processes of this machine. */
export const osEngineHost: EngineHost = {
  async spawn({ argv, env, logFd, exitPath }) {
    const program = argv[0] ?? "";
    // Through a small shell that records the engine's exit status, so that
    // a restarted agent, no longer the engine's parent, still learns it.
    const child = spawn("/bin/sh", ["-c", EXIT_RECORDER, "llmgw-engine", exitPath, ...argv], {
      detached: true,
      stdio: ["ignore", logFd, logFd],
      env,
    });
    const spawned = await new Promise<{ ok: true } | { ok: false; error: string }>((resolve) => {
      child.once("spawn", () => resolve({ ok: true }));
      child.once("error", (err) => resolve({ ok: false, error: `cannot start ${program}: ${err.message}` }));
    });
    if (!spawned.ok) return spawned;
    child.unref();
    return {
      ok: true,
      pid: child.pid ?? 0,
      onExit: (listener) => {
        child.once("exit", listener);
      },
    };
  },
  executable: executableOnPath,
  startTime: processStartTime,
  signalGroup(pid, signal) {
    try {
      process.kill(-pid, signal);
    } catch {
      // Already gone.
    }
  },
  portFree(port) {
    return new Promise<boolean>((resolve) => {
      const srv = createServer();
      srv.once("error", () => resolve(false));
      srv.listen(port, "0.0.0.0", () => srv.close(() => resolve(true)));
    });
  },
  fetch: (url, init) => fetch(url, init),
};
