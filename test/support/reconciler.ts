/**
 * Real `llmgw reconciler` child processes for tests: spawned through the
 * project's bin, their JSON log lines collected, their metrics scraped.
 * Every process started is killed by `stopAll` and by an exit hook.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../harness/nats.js";
import { LLMGW_BIN, logFlags } from "./cli.js";
import { eventually } from "./eventually.js";

const live = new Set<ChildProcess>();
process.on("exit", () => {
  for (const p of live) p.kill("SIGKILL");
});

export interface ReconcilerSpec {
  id: string;
  nats: string;
  stream: string;
  prefix: string;
  leaseBucket: string;
  gatewaysBucket: string;
  leaseTtlMs?: number;
  /** Written to a YAML/JSON file and passed with --config. */
  config?: Record<string, unknown>;
  args?: string[];
  /** Added to the process's environment (e.g. the runner's test pause point). */
  env?: Record<string, string>;
  /** How long it may take to start (default 30 s). */
  startTimeoutMs?: number;
  /** Another version's `llmgw` (test/support/old-release.ts); this tree's by default. */
  bin?: string;
  /** Loads and writes snapshots in this bucket; none (`--no-snapshots`) by default. */
  snapshotBucket?: string;
}

export interface LogLine {
  level: number;
  msg: string;
  [k: string]: unknown;
}

export class ReconcilerProcess {
  readonly lines: LogLine[] = [];
  #raw = "";
  #metricsUrl: string | undefined;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(
    readonly id: string,
    readonly proc: ChildProcess,
  ) {
    live.add(proc);
    this.exited = new Promise((resolve) =>
      proc.once("exit", (code, signal) => {
        live.delete(proc);
        resolve({ code, signal });
      }),
    );
    let buf = "";
    proc.stdout?.on("data", (b: Buffer) => {
      buf += b.toString();
      this.#raw += b.toString();
      for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        try {
          const l = JSON.parse(line) as LogLine;
          this.lines.push(l);
          if (l.msg === "metrics listening") this.#metricsUrl = `http://${String(l["metrics"])}/metrics`;
        } catch {
          // not a log line
        }
      }
    });
    proc.stderr?.on("data", (b: Buffer) => {
      this.#raw += b.toString();
    });
  }

  get running(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** The last lines printed, for failure messages. */
  output(): string {
    return this.#raw.split("\n").slice(-30).join("\n");
  }

  logged(msg: string | RegExp): boolean {
    return this.lines.some((l) => (typeof msg === "string" ? l.msg === msg : msg.test(l.msg)));
  }

  /** The value of a metric without labels (or the sum over its labels), or undefined when unreadable. */
  async metric(name: string): Promise<number | undefined> {
    if (!this.#metricsUrl || !this.running) return undefined;
    try {
      const text = await (await fetch(this.#metricsUrl, { signal: AbortSignal.timeout(2000) })).text();
      let sum: number | undefined;
      for (const line of text.split("\n")) {
        const m = /^([a-z_]+)(\{[^}]*\})? ([0-9.eE+-]+)$/.exec(line);
        if (m && m[1] === name) sum = (sum ?? 0) + Number(m[3]);
      }
      return sum;
    } catch {
      return undefined;
    }
  }

  async isLeader(): Promise<boolean> {
    return (await this.metric("llmgw_reconciler_is_leader")) === 1;
  }

  signal(sig: NodeJS.Signals): void {
    if (this.running) this.proc.kill(sig);
  }

  async kill(): Promise<void> {
    if (this.running) {
      this.proc.kill("SIGCONT");
      this.proc.kill("SIGKILL");
    }
    await this.exited;
  }
}

export async function spawnReconciler(spec: ReconcilerSpec): Promise<ReconcilerProcess> {
  const args = [
    spec.bin ?? LLMGW_BIN,
    "reconciler",
    "--id",
    spec.id,
    ...logFlags(spec.nats, spec.stream, spec.prefix),
    "--lease-bucket",
    spec.leaseBucket,
    "--gateways-bucket",
    spec.gatewaysBucket,
    "--lease-ttl-ms",
    String(spec.leaseTtlMs ?? 2000),
    "--debounce-ms",
    "50",
    "--max-delay-ms",
    "300",
    "--tick-ms",
    "2000",
    ...(spec.snapshotBucket === undefined ? ["--no-snapshots"] : ["--snapshot-bucket", spec.snapshotBucket]),
    "--metrics-listen",
    "127.0.0.1:0",
    ...(spec.args ?? []),
  ];
  if (spec.config) {
    const file = join(tempDir("rec"), "reconciler.json");
    writeFileSync(file, JSON.stringify(spec.config));
    args.push("--config", file);
  }
  const proc = spawn(process.execPath, args, {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...spec.env },
  });
  const r = new ReconcilerProcess(spec.id, proc);
  try {
    await eventually(() => r.logged("metrics listening") || !r.running, {
      what: `reconciler ${spec.id} to start`,
      timeoutMs: spec.startTimeoutMs ?? 30_000,
    });
  } catch (err) {
    // Not left running behind the test's back (it could take the lease).
    await r.kill();
    throw new Error(`${(err as Error).message}:\n${r.output()}`, { cause: err });
  }
  if (!r.running) throw new Error(`reconciler ${spec.id} exited at start:\n${r.output()}`);
  return r;
}

/** Kills every process given (SIGCONT first, so a paused one dies too). */
export async function killAll(procs: Array<ReconcilerProcess | undefined>): Promise<void> {
  await Promise.all(procs.map((p) => p?.kill()));
}
