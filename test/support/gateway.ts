/**
 * Gateways for tests: in-process (`startTestGateway`) or as the real
 * `llmgw gateway` child process (`spawnGateway`, for signal tests), plus
 * helpers to read the log back.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { pino } from "pino";
import { Gateway, type GatewayConfigInput } from "../../src/gateway/index.js";
import type { Log, LogRecord } from "../../src/log/index.js";
import { tempDir } from "../harness/nats.js";
import type { TestCerts } from "./certs.js";
import { LLMGW_BIN, logFlags } from "./cli.js";

export function rand(): string {
  return Math.random().toString(36).slice(2, 8);
}

export interface TestGatewayOptions extends Partial<GatewayConfigInput> {
  nats: string;
  stream: string;
  prefix: string;
  /** TLS from these certificates; without them the gateway runs in insecure-dev mode. */
  certs?: TestCerts;
}

/** A gateway in this process with test-sized limits, on a free loopback port. */
export async function startTestGateway(o: TestGatewayOptions): Promise<Gateway> {
  const { certs, ...rest } = o;
  const level = process.env["LLMGW_TEST_LOG"] ?? "silent";
  return await Gateway.start(
    {
      id: `gw-${rand()}`,
      listen: "127.0.0.1:0",
      insecureDev: certs === undefined,
      tls: certs ? { cert: certs.server.cert, key: certs.server.key, clientCa: certs.ca } : undefined,
      leaseBucket: `leases_${rand()}`,
      leaseTtlMs: 5_000,
      readMaxBytes: 64 * 1024,
      publishTimeoutMs: 2_000,
      drainDeadlineMs: 5_000,
      // Tests reconnect the same few node ids far more often than a fleet
      // does; the reconnect limit's own test sets it (byte-budget.test.ts).
      reconnectsPerMinute: 100_000,
      reconnectBurst: 10_000,
      ...rest,
    },
    { logger: pino({ level }) },
  );
}

/** Every event of the log now, in order. */
export async function readAll(log: Log): Promise<LogRecord[]> {
  const out: LogRecord[] = [];
  for await (const r of log.read()) out.push(r);
  return out;
}

/** Polls the log until `pred` holds for its events; returns them. */
export async function waitForLog(
  log: Log,
  pred: (records: LogRecord[]) => boolean,
  what: string,
  timeoutMs = 20_000,
): Promise<LogRecord[]> {
  const deadline = Date.now() + timeoutMs;
  let last: LogRecord[] = [];
  for (;;) {
    try {
      last = await readAll(log);
      if (pred(last)) return last;
    } catch {
      // The log may be restarting; try again.
    }
    if (Date.now() > deadline) {
      const kinds = last.map((r) => r.event.body.case).join(", ");
      throw new Error(`log never showed ${what} within ${timeoutMs} ms; it holds: ${kinds}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Waits until `cond` is true, polling. */
export async function waitUntil(cond: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export interface GatewayArgs {
  id?: string;
  nats: string;
  stream: string;
  prefix: string;
  /** The gateways' lease bucket; a fresh one when not given. */
  leaseBucket?: string;
  /** `--revoked-bucket`, when given. */
  revokedBucket?: string;
  /** `--metrics-listen`: loopback on a free port when not given; `false` for none. */
  metricsListen?: string | false;
}

/** The flags of a `llmgw gateway` on one log, for `spawnGateway` (more flags after them). */
export function gatewayArgs(o: GatewayArgs, ...more: string[]): string[] {
  return [
    ...(o.id === undefined ? [] : ["--id", o.id]),
    ...logFlags(o.nats, o.stream, o.prefix),
    ...["--lease-bucket", o.leaseBucket ?? `leases_${rand()}`],
    ...(o.revokedBucket === undefined ? [] : ["--revoked-bucket", o.revokedBucket]),
    ...(o.metricsListen === false ? [] : ["--metrics-listen", o.metricsListen ?? "127.0.0.1:0"]),
    ...more,
  ];
}

export interface GatewayProcess {
  readonly proc: ChildProcess;
  /** Where agents connect, as the gateway logged it. */
  readonly url: string;
  /** Its /metrics endpoint, when started with --metrics-listen. */
  readonly metricsUrl: string | undefined;
  /** The certificate, key and client CA files it serves with (replace them to rotate). */
  readonly files: { cert: string; key: string; ca: string };
  output(): string;
  /** Resolves with the exit code (or signal) once the process is gone. */
  readonly exited: Promise<number | NodeJS.Signals | null>;
}

/**
 * Runs `llmgw gateway` as a child process with TLS from `certs`; resolves
 * once it listens. `maxOpenFiles` runs it with that file-descriptor limit.
 */
export async function spawnGateway(
  args: string[],
  certs: TestCerts,
  env: NodeJS.ProcessEnv = {},
  opts: { maxOpenFiles?: number } = {},
): Promise<GatewayProcess> {
  const dir = tempDir("gw");
  const files = { cert: join(dir, "server.crt"), key: join(dir, "server.key"), ca: join(dir, "ca.crt") };
  writeFileSync(files.cert, certs.server.cert);
  writeFileSync(files.key, certs.server.key);
  writeFileSync(files.ca, certs.ca);
  const command = [process.execPath, LLMGW_BIN, "gateway", ...args];
  // Through a shell that lowers the file-descriptor limit and execs the gateway (same pid).
  const [file, ...argv] =
    opts.maxOpenFiles === undefined
      ? command
      : ["sh", "-c", `ulimit -n ${opts.maxOpenFiles} && exec "$@"`, "sh", ...command];
  const proc = spawn(file ?? process.execPath, argv, {
    env: {
      ...process.env,
      LLMGW_GATEWAY_TLS_CERT: files.cert,
      LLMGW_GATEWAY_TLS_KEY: files.key,
      LLMGW_GATEWAY_CLIENT_CA: files.ca,
      LLMGW_GATEWAY_LISTEN: "127.0.0.1:0",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  proc.stdout?.on("data", (b) => (out += b));
  proc.stderr?.on("data", (b) => (out += b));
  const exited = new Promise<number | NodeJS.Signals | null>((resolve) =>
    proc.once("exit", (code, sig) => resolve(code ?? sig)),
  );
  const deadline = Date.now() + 30_000;
  for (;;) {
    const m = /"url":"(https:\/\/[^"]+)"(?:,"metrics":"([^"]+)")?.*"msg":"gateway listening"/.exec(out);
    if (m?.[1]) return { proc, url: m[1], metricsUrl: m[2], files, output: () => out, exited };
    if (proc.exitCode !== null) throw new Error(`llmgw gateway exited with ${proc.exitCode}:\n${out}`);
    if (Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error(`llmgw gateway did not listen within 30 s:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The value of one sample at a /metrics URL (0 when the series is absent). */
export async function metricValue(metricsUrl: string, name: string, labels = ""): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  const series = labels === "" ? name : `${name}{${labels}}`;
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}
