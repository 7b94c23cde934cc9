/**
 * Real nats-server processes for tests and benchmarks (the benchmarks import
 * this harness; the tests own it): a single JetStream server or a
 * 3-node JetStream cluster on loopback ports the servers choose themselves
 * (port -1; the harness reads back which) with temporary store folders.
 * Servers can be stopped, killed with SIGKILL and restarted on the same
 * ports and store. Everything started is removed by `close()`, and by a
 * process exit hook when a test dies before its `finally`.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { jetstreamManager, StorageType } from "@nats-io/jetstream";
import {
  AuthorizationError,
  type ConnectionOptions,
  connect,
  type NatsConnection,
} from "@nats-io/transport-node";
import { type Hold, RouteProxy } from "./route-proxy.js";

const live = new Set<ChildProcess>();
const tempDirs = new Set<string>();
process.on("exit", () => {
  for (const p of live) p.kill("SIGKILL");
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
});

/** The nats-server binary: LLMGW_NATS_SERVER (set by scripts/test) or the one found by scripts/ensure-nats-server. */
export function natsServerBinary(): string {
  const fromEnv = process.env["LLMGW_NATS_SERVER"];
  if (fromEnv) return fromEnv;
  const out = execFileSync(join(import.meta.dirname, "../../scripts/ensure-nats-server"), {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "ignore"],
  });
  const bin = out.trim().split("\n").pop();
  if (!bin) throw new Error("scripts/ensure-nats-server printed no path");
  process.env["LLMGW_NATS_SERVER"] = bin;
  return bin;
}

export function tempDir(prefix: string): string {
  const d = mkdtempSync(join(tmpdir(), `llmgw-${prefix}-`));
  tempDirs.add(d);
  return d;
}

/** A unique stream name for one test. */
export function uniqueStream(tag = "T"): string {
  return `${tag}_${process.pid}_${Date.now().toString(36)}_${Math.floor(Math.random() * 1e6).toString(36)}`.toUpperCase();
}

export interface NatsServer {
  readonly name: string;
  readonly port: number;
  readonly url: string;
  readonly storeDir: string;
  readonly running: boolean;
  /** Process id while running (0 otherwise). */
  readonly pid: number;
  /** Graceful stop (SIGTERM), waits for exit. */
  stop(): Promise<void>;
  /** SIGKILL, waits for exit. */
  kill(): Promise<void>;
  /** Starts again on the same ports and store. */
  restart(): Promise<void>;
  /** What the server printed (last lines), for failure messages. */
  output(): string;
  /** Whether it printed, since it last started, that it knows a JetStream meta leader. */
  readonly knowsMetaLeader: boolean;
  /** When it last started (ms since the epoch; 0 before its first start). */
  readonly startedAt: number;
}

interface ServerSpec {
  name: string;
  /** Client port; 0 until the server has chosen one (-1 in its config). */
  port: number;
  /** Route port (a cluster member); 0 until the server has chosen one. */
  clusterPort?: number;
  /** The route ports this member connects to. */
  routes?: number[];
  /** The route address other members are told (a route proxy in front of this one). */
  clusterAdvertise?: number;
  storeDir: string;
  configFile: string;
  /** A config file the server includes (e.g. an authorization block). */
  include?: string;
  /** What the readiness probe connects with, for a server that requires TLS or credentials. */
  probe?: Partial<ConnectionOptions>;
}

class ServerProcess implements NatsServer {
  #proc: ChildProcess | undefined;
  #out: string[] = [];
  #knowsMetaLeader = false;
  #startedAt = 0;

  constructor(private readonly spec: ServerSpec) {}

  get name() {
    return this.spec.name;
  }
  get port() {
    return this.spec.port;
  }
  get url() {
    return `nats://127.0.0.1:${this.spec.port}`;
  }
  get storeDir() {
    return this.spec.storeDir;
  }
  /** The route port it listens on (0 before its first start). */
  get clusterPort() {
    return this.spec.clusterPort ?? 0;
  }
  /** The routes it opens from its next start on. */
  setRoutes(ports: number[]): void {
    this.spec.routes = ports;
    writeConfig(this.spec, dirname(this.spec.configFile));
  }
  get running() {
    return this.#proc !== undefined && this.#proc.exitCode === null && this.#proc.signalCode === null;
  }

  get pid(): number {
    return this.running ? (this.#proc?.pid ?? 0) : 0;
  }
  output() {
    return this.#out.slice(-40).join("");
  }
  get knowsMetaLeader() {
    return this.#knowsMetaLeader;
  }
  get startedAt() {
    return this.#startedAt;
  }

  async start(): Promise<void> {
    const proc = spawn(natsServerBinary(), ["-c", this.spec.configFile], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.#proc = proc;
    this.#knowsMetaLeader = false;
    this.#startedAt = Date.now();
    live.add(proc);
    proc.on("exit", () => live.delete(proc));
    const keep = (b: Buffer) => {
      const text = b.toString();
      if (/metadata leader/.test(text)) this.#knowsMetaLeader = true;
      this.#out.push(text);
      if (this.#out.length > 200) this.#out.splice(0, 100);
    };
    proc.stdout?.on("data", keep);
    proc.stderr?.on("data", keep);
    if (this.spec.port === 0 || this.spec.clusterPort === 0) {
      // Port -1 in the config: the server chose one; it is kept (written into
      // the config) so that a restart comes back on the same port.
      const output = () => this.#out.join("");
      if (this.spec.port === 0) this.spec.port = await listenedPort(proc, output, "client");
      if (this.spec.clusterPort === 0) this.spec.clusterPort = await listenedPort(proc, output, "route");
      writeConfig(this.spec, dirname(this.spec.configFile));
    }
    await waitForPort(this.spec.port, proc, () => this.output(), this.spec.probe);
  }

  async stop(): Promise<void> {
    await this.#signal("SIGTERM");
  }
  async kill(): Promise<void> {
    await this.#signal("SIGKILL");
  }
  async restart(): Promise<void> {
    if (this.running) await this.stop();
    await this.start();
  }

  async #signal(sig: NodeJS.Signals): Promise<void> {
    const proc = this.#proc;
    if (!proc || !this.running) return;
    const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
    proc.kill(sig);
    const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  }
}

/** The client or route port a server started with port -1 says it listens on. */
async function listenedPort(
  proc: ChildProcess,
  output: () => string,
  what: "client" | "route",
): Promise<number> {
  const said = new RegExp(`Listening for ${what} connections on [^\\s]*:(\\d+)`);
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    const m = said.exec(output());
    if (m) return Number(m[1]);
    if (proc.exitCode !== null) throw new Error(`nats-server exited with ${proc.exitCode}:\n${output()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`nats-server did not say which ${what} port it listens on within 15 s:\n${output()}`);
}

async function waitForPort(
  port: number,
  proc: ChildProcess,
  output: () => string,
  probe: Partial<ConnectionOptions> = {},
): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`nats-server exited with ${proc.exitCode}:\n${output()}`);
    try {
      const nc = await connect({ servers: `127.0.0.1:${port}`, timeout: 500, reconnect: false, ...probe });
      await nc.close();
      return;
    } catch (err) {
      // A server with authentication on refuses the anonymous probe: it is up.
      if (err instanceof AuthorizationError) return;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  throw new Error(`nats-server did not listen on ${port} within 15 s:\n${output()}`);
}

function writeConfig(spec: Omit<ServerSpec, "configFile">, dir: string): string {
  const lines = [
    `server_name: ${spec.name}`,
    "host: 127.0.0.1",
    // 0 asks the server to choose (-1 in its config): nothing to reserve beforehand.
    `port: ${spec.port === 0 ? -1 : spec.port}`,
    "jetstream {",
    `  store_dir: ${JSON.stringify(spec.storeDir)}`,
    "  max_memory_store: 256MB",
    "  max_file_store: 2GB",
    "}",
  ];
  // nats-server resolves an include relative to the including file, absolute paths too.
  if (spec.include !== undefined) lines.push(`include ${JSON.stringify(relative(dir, spec.include))}`);
  if (spec.clusterPort !== undefined) {
    lines.push(
      "cluster {",
      "  name: llmgw-test",
      "  host: 127.0.0.1",
      `  port: ${spec.clusterPort === 0 ? -1 : spec.clusterPort}`,
      `  routes: [${(spec.routes ?? []).map((p) => `"nats-route://127.0.0.1:${p}"`).join(", ")}]`,
      // Behind route proxies: members learn of each other at the proxies'
      // addresses, and the route protocol stays readable to them.
      ...(spec.clusterAdvertise !== undefined
        ? [`  advertise: "127.0.0.1:${spec.clusterAdvertise}"`, "  compression: off"]
        : []),
      // Clients are given every server's URL; not advertising keeps a client on
      // the addresses it was given (a test's TCP proxy stays in the path).
      "  no_advertise: true",
      "}",
    );
  }
  const file = join(dir, `${spec.name}.conf`);
  writeFileSync(file, `${lines.join("\n")}\n`);
  return file;
}

/**
 * Starts one JetStream server on a loopback port it chooses itself (kept
 * across restarts), with a temp store; `include` adds a config file of
 * its own (an absolute path), e.g. the auth.conf of `llmgw nats-auth init`,
 * and `probe` what the readiness check connects with (TLS, credentials).
 * `storeDir` opens a store of someone else's instead (it is left in place),
 * `name` the server name it was written under.
 */
export async function startServer(
  opts: { include?: string; probe?: Partial<ConnectionOptions>; storeDir?: string; name?: string } = {},
): Promise<NatsServer & { close(): Promise<void> }> {
  const dir = tempDir("nats");
  const spec = {
    name: opts.name ?? "n1",
    port: 0,
    storeDir: opts.storeDir ?? join(dir, "store"),
    ...(opts.include !== undefined ? { include: opts.include } : {}),
    ...(opts.probe !== undefined ? { probe: opts.probe } : {}),
  };
  const server = new ServerProcess({ ...spec, configFile: writeConfig(spec, dir) });
  await server.start();
  return Object.assign(server, {
    async close() {
      await server.kill();
      rmSync(dir, { recursive: true, force: true });
      tempDirs.delete(dir);
    },
  });
}

export interface NatsCluster {
  readonly servers: NatsServer[];
  /** Every server's URL, comma-separated (what --nats takes). */
  readonly url: string;
  /**
   * Resolves when JetStream has a meta leader, answers through every running
   * server, and counts every running server as an online peer (a stream with
   * one copy on each can be placed): a server just (re)started answers
   * before the meta leader has it back, and a replicated stream created
   * then fails with "no suitable peers for placement".
   */
  waitForMetaLeader(timeoutMs?: number): Promise<void>;
  /**
   * Resolves when every replica of every stream (the log and the KV
   * buckets) is current, as each stream's leader reports it, or fails after
   * `timeoutMs` naming the replicas still behind. Nothing is restarted to
   * get there: the restart that mended a nats-server 2.10.27 raft fault is
   * gone with the move to 2.15 (docs/RELIABILITY.md, "nats-server version").
   */
  waitCurrent(opts?: { timeoutMs?: number }): Promise<void>;
  /**
   * Holds back one raft group's traffic to and from one member (a cluster
   * started with `routeProxies`): its copy of that stream stops where it is
   * while it stays a member serving clients. Returns the release, and how
   * many messages the hold dropped so far.
   */
  holdRaftGroup(member: string, group: string): { release(): void; dropped(): number };
  close(): Promise<void>;
}

/** Every replica of every stream that its leader does not report current: what is wrong. */
async function replicasBehind(servers: NatsServer[]): Promise<string[]> {
  const running = servers.filter((s) => s.running);
  let nc: NatsConnection | undefined;
  try {
    nc = await connect({ servers: running.map((s) => s.url), timeout: 1000, reconnect: false });
    const jsm = await jetstreamManager(nc, { timeout: 2000 });
    const out: string[] = [];
    for await (const si of jsm.streams.list()) {
      const cl = si.cluster;
      if ((si.config.num_replicas ?? 1) < 2) continue;
      if (!cl?.leader) {
        out.push(`${si.config.name}: no leader`);
        continue;
      }
      const listed = cl.replicas ?? [];
      const want = (si.config.num_replicas ?? 1) - 1;
      if (listed.length < want)
        out.push(`${si.config.name}: its leader lists ${listed.length} of ${want} other replicas`);
      for (const r of listed) {
        if (!r.current || r.offline)
          out.push(
            `${si.config.name} on ${r.name}: lag ${r.lag ?? 0}, last heard from ${Math.round(r.active / 1e6)} ms ago`,
          );
      }
    }
    return out;
  } catch (err) {
    return [String(err)];
  } finally {
    await nc?.close().catch(() => {});
  }
}

/** Creates and deletes a throwaway stream with a copy on every one of `running` until that works. */
async function waitPlaceable(running: NatsServer[], deadline: number, timeoutMs: number): Promise<void> {
  if (running.length < 2) return;
  const name = `READY_${process.pid}_${Date.now().toString(36)}`;
  let last: unknown;
  for (;;) {
    let nc: NatsConnection | undefined;
    try {
      nc = await connect({ servers: running.map((s) => s.url), timeout: 1000, reconnect: false });
      const jsm = await jetstreamManager(nc, { timeout: 2000 });
      await jsm.streams.add({
        name,
        subjects: [`${name}.>`],
        num_replicas: Math.min(running.length, 5),
        storage: StorageType.Memory,
      });
      await jsm.streams.delete(name);
      return;
    } catch (err) {
      last = err;
      if (Date.now() > deadline) {
        const out = running.map((s) => `${s.name}${s.knowsMetaLeader ? "" : " (no meta leader)"}`).join(", ");
        throw new Error(
          `JetStream did not count all ${running.length} servers as peers within ${timeoutMs} ms (${out}): ${String(last)}`,
        );
      }
      await new Promise((r) => setTimeout(r, 200));
    } finally {
      await nc?.close().catch(() => {});
    }
  }
}

/**
 * Starts a 3-node JetStream cluster with temp stores, every member on client
 * and route ports it chooses itself (port -1; nothing is reserved beforehand
 * for another process to take): the first member, the seed, starts first,
 * the others with a route to it, and it tells them of each other. Once
 * every member's route port is known, each member's config names every
 * other member's, so that a restarted member, the seed too, comes back on
 * the ports it had and reaches the rest. With `routeProxies`, every route
 * to a member goes through a `RouteProxy` in front of it (see
 * `holdRaftGroup`), on a port the proxy chooses.
 */
export async function startCluster(size = 3, opts: { routeProxies?: boolean } = {}): Promise<NatsCluster> {
  const dir = tempDir("cluster");
  const names = Array.from({ length: size }, (_, i) => `n${i + 1}`);
  // Each member's route port, known once it has started.
  const routePorts = names.map(() => {
    let resolve: (port: number) => void = () => {};
    const promise = new Promise<number>((r) => {
      resolve = r;
    });
    return { promise, resolve };
  });
  const holds: Hold[] = [];
  const proxies = opts.routeProxies
    ? await Promise.all(names.map((name, i) => RouteProxy.start(name, routePorts[i]!.promise, () => holds)))
    : [];
  // nats-server refuses to start a JetStream cluster member with no route
  // configured, and at its first start the seed has no other member's route
  // port to name (behind proxies it names theirs). It is given a route to
  // itself, through a relay on a port the relay chooses (a RouteProxy that
  // holds nothing): the server sees itself at the other end and drops that
  // route for good. The relay stays up while the cluster does.
  const bootstrap =
    proxies.length === 0 ? await RouteProxy.start(names[0]!, routePorts[0]!.promise, () => []) : undefined;
  const servers = names.map((name, i) => {
    const spec = {
      name,
      port: 0,
      clusterPort: 0,
      routes: [],
      ...(proxies[i] ? { clusterAdvertise: proxies[i].port } : {}),
      storeDir: join(dir, `store-${i + 1}`),
    };
    return new ServerProcess({ ...spec, configFile: writeConfig(spec, dir) });
  });
  // What a member's routes point at: every other member whose route port is
  // known, or the proxies in front of them.
  const routesOf = (i: number) =>
    servers.flatMap((s, j) => (j === i ? [] : [proxies[j]?.port ?? s.clusterPort])).filter((p) => p !== 0);
  const startMember = async (i: number) => {
    await servers[i]!.start();
    routePorts[i]!.resolve(servers[i]!.clusterPort);
  };
  try {
    servers[0]!.setRoutes(bootstrap ? [bootstrap.port] : routesOf(0));
    await startMember(0);
    for (let i = 1; i < size; i++) servers[i]!.setRoutes(routesOf(i));
    await Promise.all(servers.slice(1).map((_, k) => startMember(k + 1)));
  } catch (err) {
    await Promise.all(servers.map((s) => s.kill()));
    await Promise.all([...proxies, ...(bootstrap ? [bootstrap] : [])].map((p) => p.close()));
    throw err;
  }
  // For restarts: every member names every other one.
  for (const [i, s] of servers.entries()) s.setRoutes(routesOf(i));
  const cluster: NatsCluster = {
    servers,
    url: servers.map((s) => s.url).join(","),
    async waitForMetaLeader(timeoutMs = 45_000) {
      const deadline = Date.now() + timeoutMs;
      for (const s of servers.filter((x) => x.running)) {
        let last: unknown;
        for (;;) {
          if (Date.now() > deadline) {
            throw new Error(`no JetStream meta leader via ${s.name} within ${timeoutMs} ms: ${String(last)}`);
          }
          let nc: NatsConnection | undefined;
          try {
            nc = await connect({ servers: s.url, timeout: 1000, reconnect: false });
            const jsm = await jetstreamManager(nc, { timeout: 1000 });
            await jsm.getAccountInfo();
            break;
          } catch (err) {
            last = err;
            await new Promise((r) => setTimeout(r, 200));
          } finally {
            await nc?.close().catch(() => {});
          }
        }
      }
      await waitPlaceable(
        servers.filter((x) => x.running),
        deadline,
        timeoutMs,
      );
    },
    async waitCurrent({ timeoutMs = 90_000 } = {}) {
      const started = Date.now();
      for (;;) {
        const behind = await replicasBehind(servers);
        if (behind.length === 0) return;
        if (Date.now() - started > timeoutMs) {
          throw new Error(`replicas still behind after ${timeoutMs} ms: ${behind.join("; ")}`);
        }
        await new Promise((r) => setTimeout(r, 250));
      }
    },
    holdRaftGroup(member, group) {
      if (proxies.length === 0) throw new Error("holdRaftGroup needs a cluster started with routeProxies");
      const hold = { member, group };
      holds.push(hold);
      const before = proxies.reduce((n, p) => n + p.dropped, 0);
      return {
        release: () => {
          const i = holds.indexOf(hold);
          if (i >= 0) holds.splice(i, 1);
        },
        dropped: () => proxies.reduce((n, p) => n + p.dropped, 0) - before,
      };
    },
    async close() {
      await Promise.all(servers.map((s) => s.kill()));
      await Promise.all([...proxies, ...(bootstrap ? [bootstrap] : [])].map((p) => p.close()));
      rmSync(dir, { recursive: true, force: true });
      tempDirs.delete(dir);
    },
  };
  return cluster;
}
