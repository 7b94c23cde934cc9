/**
 * A simulated machine's engines, seen from the real engine supervisor
 * (src/agent/engine/supervisor.ts): an `EngineHost` whose processes,
 * ports and HTTP are faked in process. Nothing is spawned. A "process" is a
 * PID, a start time and timers: it loads for `startDelayMs`, then answers
 * its health probe and serves its metrics (Prometheus text, vLLM's metric
 * names) with the load the simulator's load model gives; the node's fault
 * plan bends it (runs out of memory at start, crash-loops, hangs while
 * loading, exits on its own, is refused, or never comes back from its
 * launch), each fault's course being `engineCourse` (faults.ts), which the
 * simulation's engines follow too. A drain hook makes it finish its in-flight requests over
 * `drainMs`; a signal ends it after a short stop delay, and its exit is
 * recorded beside the shard's record as the real wrapper does, so that a
 * restarted agent adopts what still runs and learns how the rest ended.
 *
 * The host is the machine: it outlives the agent processes (each has its
 * own supervisor over it) and forgets everything only when the machine
 * restarts empty. With `engineHttp` each engine also listens on its port
 * (SimEngineServer), so a router or a client can reach it.
 */
import { appendFile, rename, writeFile } from "node:fs/promises";
import {
  type EngineConfig,
  type EnginesConfig,
  engineSchema,
  READY_INTERVAL_MS,
} from "../agent/engine/config.js";
import {
  type EngineHost,
  type EngineSpawn,
  type EngineSpawned,
  osEngineHost,
} from "../agent/engine/engine-host.js";
import type { SimConfig } from "./config.js";
import type { NodeFaultPlan } from "./fault-plan.js";
import { type EngineCourse, engineCourse } from "./faults.js";
import type { ShardLoadReading } from "./load.js";
import { SimEngineServer } from "./openai-engine.js";

/** The simulated engine's program; its argv carries what the engine needs to know of its shard. */
export const SIM_ENGINE_PROGRAM = "llmgw-sim-engine";

/** argv[1..6]: shard, replica, model, GPUs, rank, port; the catalog's engine arguments follow. */
const SIM_ENGINE_COMMAND = [
  SIM_ENGINE_PROGRAM,
  "{shard_id}",
  "{replica_id}",
  "{model}",
  "{gpu_indices}",
  "{rank}",
  "{port}",
];
const FIXED_ARGS = SIM_ENGINE_COMMAND.length;

/** What the load model needs to know of an engine. */
export interface SimEngineShard {
  shardId: string;
  replicaId: string;
  model: string;
  rank: number;
  gpuIndices: number[];
}

export interface SimEngineHostOptions {
  nodeId: string;
  config: SimConfig;
  faults: NodeFaultPlan;
  /** The load a serving engine reports (src/sim/load.ts); undefined: an idle engine. */
  load?: (shard: SimEngineShard) => ShardLoadReading | undefined;
  /** From SIGTERM to the engine's exit (default 100 ms). */
  stopDelayMs?: number;
}

type Phase = "loading" | "serving" | "hung";

interface SimProcess extends SimEngineShard {
  pid: number;
  startTime: string;
  port: number;
  phase: Phase;
  /**
   * While loading: when (performance.now()) the load ends and the engine
   * serves, and what it then does (see #run). Undefined: not loading, or
   * loading forever (hung, or stopped meanwhile).
   */
  load: { readyAt: number; serve: () => void } | undefined;
  /** Since when the drain hook was called, with what was in flight then; undefined: not draining. */
  drain: { sinceMs: number; inFlight: number; kvCacheUse: number } | undefined;
  exiting: boolean;
  logPath: string;
  exitPath: string;
  timers: Set<NodeJS.Timeout>;
  onExit: Array<(code: number | null, signal: NodeJS.Signals | null) => void>;
  server?: SimEngineServer;
}

/** PIDs are unique in the process (the fleet's machines share them; that is harmless and keeps them distinct). */
let lastPid = 1000;

/** What an engine that cannot bind its port prints (the supervisor retries it once on another port). */
const ADDRESS_IN_USE_OUTPUT = "OSError: [Errno 98] Address already in use";

export class SimEngineHost implements EngineHost {
  readonly #o: SimEngineHostOptions;
  readonly #byPid = new Map<number, SimProcess>();
  readonly #byPort = new Map<number, SimProcess>();
  readonly #byShard = new Map<string, SimProcess>();
  /** Launches that never come back (`never-starting`), answered when the machine goes. */
  readonly #hanging = new Set<(r: EngineSpawned) => void>();
  /** Shards whose next launch is an engine already loaded (started before the simulator's run). */
  readonly #preloaded = new Set<string>();

  constructor(o: SimEngineHostOptions) {
    this.#o = o;
  }

  // --- EngineHost -----------------------------------------------------------------

  async spawn(s: EngineSpawn): Promise<EngineSpawned> {
    const [, shardId = "", replicaId = "", model = "", gpus = "", rank = "0", portText = "0"] = s.argv;
    const engineArgs = s.argv.slice(FIXED_ARGS);
    const gpuIndices = gpus === "" ? [] : gpus.split(",").map(Number);
    // An engine already loaded serves at once, with no fault.
    const course: EngineCourse = this.#preloaded.delete(shardId)
      ? { launch: "launched", readyAfterMs: 0, exit: undefined }
      : engineCourse(this.#o.faults.shardFault(engineArgs), this.#o.config, gpuIndices[0] ?? 0);
    if (course.launch === "refused") return { ok: false, error: course.error };
    if (course.launch === "never-returns")
      // The launch never returns (an image pull or a fork that hangs): the agent says nothing.
      return new Promise((resolve) => this.#hanging.add(resolve));
    const p: SimProcess = {
      pid: ++lastPid,
      startTime: `sim-${Date.now()}`,
      port: Number(portText),
      shardId,
      replicaId,
      model,
      rank: Number(rank),
      gpuIndices,
      phase: course.readyAfterMs === undefined && course.exit === undefined ? "hung" : "loading",
      load: undefined,
      drain: undefined,
      exiting: false,
      logPath: s.logPath,
      exitPath: s.exitPath,
      timers: new Set(),
      onExit: [],
    };
    this.#byPid.set(p.pid, p);
    this.#byShard.set(shardId, p);
    if (this.#byPort.has(p.port)) {
      this.#after(p, 10, () => this.#exit(p, 1, null, ADDRESS_IN_USE_OUTPUT));
    } else {
      this.#byPort.set(p.port, p);
      this.#serveHttp(p);
      this.#run(p, course);
    }
    return {
      ok: true,
      pid: p.pid,
      onExit: (listener) => {
        p.onExit.push(listener);
      },
    };
  }

  async executable(program: string): Promise<boolean> {
    return program === SIM_ENGINE_PROGRAM;
  }

  async startTime(pid: number): Promise<string | undefined> {
    return this.#byPid.get(pid)?.startTime;
  }

  signalGroup(pid: number, signal: NodeJS.Signals): void {
    const p = this.#byPid.get(pid);
    if (!p || p.exiting) return;
    if (signal === "SIGKILL") {
      this.#exit(p, null, "SIGKILL", "");
      return;
    }
    // A graceful shutdown: what it was doing is cut (and said), and it exits cleanly.
    const inFlight = p.phase === "serving" ? this.#load(p).running : 0;
    const cut = inFlight > 0 ? `WARNING shutting down with ${inFlight} requests still in flight\n` : "";
    this.#clearTimers(p);
    // One stopped while loading never comes to serve.
    p.load = undefined;
    this.#after(p, this.#o.stopDelayMs ?? 100, () =>
      this.#exit(p, 0, null, `INFO received ${signal}\n${cut}INFO Engine exited`),
    );
  }

  async portFree(port: number): Promise<boolean> {
    if (this.#byPort.has(port)) return false;
    if (!this.#o.config.engineHttp) return true;
    // Engines that listen share this machine's ports with everything else on it.
    return osEngineHost.portFree(port);
  }

  /** A property, not a method: the supervisor hands it on as a function (readEngineLoad's `get`). */
  readonly fetch = async (url: string, init: { method?: string; signal: AbortSignal }): Promise<Response> => {
    init.signal.throwIfAborted();
    const m = URL_PARTS.exec(url);
    const p = m ? this.#byPort.get(Number(m[1])) : undefined;
    // A load ends by the clock, as a real engine's does whatever its agent's
    // event loop is busy with: a probe due at that instant is not turned away
    // because the engine's own timer is queued behind it.
    if (p && p.load !== undefined && performance.now() >= p.load.readyAt) p.load.serve();
    // Nothing listens yet (loading weights), or never will (hung): refused, as a closed port is.
    if (!p || p.exiting || p.phase !== "serving")
      throw new TypeError(`fetch failed: connect ECONNREFUSED ${url}`);
    const path = m?.[2] ?? "/";
    const method = init.method ?? "GET";
    if (path === "/health" && method === "GET") return new Response(null, { status: p.drain ? 503 : 200 });
    if (path === "/metrics" && method === "GET")
      return new Response(this.#metricsText(p), {
        status: 200,
        headers: { "content-type": "text/plain; version=0.0.4" },
      });
    if (path === "/drain" && (method === "POST" || method === "PUT")) {
      this.#startDrain(p);
      return new Response(null, { status: 200 });
    }
    return new Response("not found\n", { status: 404 });
  };

  // --- the simulated machine ------------------------------------------------------------

  /** The next launch of these shards is an engine that was already loaded: serving at once, no fault. */
  preload(shardIds: readonly string[]): void {
    for (const id of shardIds) this.#preloaded.add(id);
  }

  /** The engine of `shardId` now (its rank and GPUs), if one runs. */
  engine(shardId: string): SimEngineShard | undefined {
    return this.#byShard.get(shardId);
  }

  /** The GPUs of each engine that has loaded and holds its memory (serving, not on its way out). */
  forEachLoaded(fn: (gpuIndices: readonly number[]) => void): void {
    for (const p of this.#byPid.values()) if (p.phase === "serving" && !p.exiting) fn(p.gpuIndices);
  }

  /** GPU `index` fell off the bus: its engines die with it. */
  gpuFailed(index: number, problem: string): void {
    for (const p of [...this.#byPid.values()])
      if (p.gpuIndices.includes(index))
        this.#exit(p, 1, null, `RuntimeError: CUDA error: unspecified launch failure (${problem})`);
  }

  /** The machine restarted, or the simulator stops: every engine is gone, unsaid (no agent heard it). */
  clear(): void {
    for (const p of this.#byPid.values()) this.#release(p);
    this.#byPid.clear();
    this.#byPort.clear();
    this.#byShard.clear();
    for (const answer of this.#hanging)
      answer({ ok: false, error: "the machine restarted during the launch" });
    this.#hanging.clear();
  }

  // --- one engine -------------------------------------------------------------------

  /** The engine's course in time: ready (serving) after its load, and an exit of its own if it has one. */
  #run(p: SimProcess, course: Extract<EngineCourse, { launch: "launched" }>) {
    const { readyAfterMs, exit } = course;
    const exitNow = () => exit && this.#exit(p, exit.exitCode, null, exit.output);
    if (readyAfterMs === undefined) {
      // Stuck loading weights until someone stops it, or failing while loading.
      if (exit) this.#after(p, exit.afterMs, exitNow);
      return;
    }
    const ready = () => {
      if (p.load === undefined) return;
      p.load = undefined;
      p.phase = "serving";
      if (exit) this.#after(p, exit.afterMs, exitNow);
    };
    p.load = { readyAt: performance.now() + readyAfterMs, serve: ready };
    if (readyAfterMs === 0) ready();
    else this.#after(p, readyAfterMs, ready);
  }

  /** With `engineHttp`, the engine listens on its port; one that cannot exits as a real one would. */
  #serveHttp(p: SimProcess): void {
    const c = this.#o.config;
    if (!c.engineHttp) return;
    const server = new SimEngineServer({
      nodeId: this.#o.nodeId,
      replicaId: p.replicaId,
      shardId: p.shardId,
      model: p.model,
      chunkMs: c.engineChunkMs,
    });
    p.server = server;
    server.listen(c.engineHost, p.port).catch((err: unknown) => {
      p.server = undefined;
      const code = (err as NodeJS.ErrnoException).code;
      this.#exit(p, 1, null, code === "EADDRINUSE" ? ADDRESS_IN_USE_OUTPUT : `cannot listen: ${String(err)}`);
    });
  }

  /** What the engine has in flight now: the load model's, or with a drain, what is left of it. */
  #load(p: SimProcess): { running: number; waiting: number; kvCacheUse: number } {
    const live = p.server?.running ?? 0;
    if (p.drain) {
      // What was in flight finishes evenly over drainMs; nothing new is queued.
      const drainMs = this.#o.config.drainMs;
      const left = drainMs <= 0 ? 0 : Math.max(0, 1 - (Date.now() - p.drain.sinceMs) / drainMs);
      return {
        running: Math.ceil(p.drain.inFlight * left) + live,
        waiting: 0,
        kvCacheUse: p.drain.kvCacheUse * left,
      };
    }
    const l = this.#o.load?.(p);
    const slots = this.#o.config.loadSlots;
    const kvCacheUse = l?.kvCacheUse ?? 0;
    return { running: Math.round(kvCacheUse * slots) + live, waiting: l?.queueDepth ?? 0, kvCacheUse };
  }

  #metricsText(p: SimProcess): string {
    const { running, waiting, kvCacheUse } = this.#load(p);
    const labels = `model_name="${p.model.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
    return [
      "# TYPE vllm:num_requests_running gauge",
      `vllm:num_requests_running{${labels}} ${running}`,
      "# TYPE vllm:num_requests_waiting gauge",
      `vllm:num_requests_waiting{${labels}} ${waiting}`,
      "# TYPE vllm:kv_cache_usage_perc gauge",
      `vllm:kv_cache_usage_perc{${labels}} ${kvCacheUse}`,
      "",
    ].join("\n");
  }

  /** The drain hook: health turns 503 and what is in flight (at least one request) finishes over drainMs. */
  #startDrain(p: SimProcess): void {
    if (p.drain) return;
    const { running, waiting, kvCacheUse } = this.#load(p);
    p.drain = { sinceMs: Date.now(), inFlight: Math.max(1, running + waiting), kvCacheUse };
    p.server?.drain();
  }

  #after(p: SimProcess, ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      p.timers.delete(t);
      fn();
    }, ms);
    p.timers.add(t);
  }

  #clearTimers(p: SimProcess): void {
    for (const t of p.timers) clearTimeout(t);
    p.timers.clear();
  }

  #release(p: SimProcess): void {
    this.#clearTimers(p);
    p.load = undefined;
    p.server?.close();
    p.server = undefined;
  }

  /**
   * The engine exited: its last words go to its log and its status beside
   * its record (as the real wrapper writes it; none after SIGKILL), then
   * whoever waits for it hears it.
   */
  #exit(p: SimProcess, code: number | null, signal: NodeJS.Signals | null, output: string): void {
    if (p.exiting) return;
    p.exiting = true;
    this.#release(p);
    void (async () => {
      try {
        if (output) await appendFile(p.logPath, `${output}\n`, { mode: 0o600 });
        if (code !== null) {
          await writeFile(`${p.exitPath}.tmp`, `${code}\n`, { mode: 0o600 });
          await rename(`${p.exitPath}.tmp`, p.exitPath);
        }
      } catch {
        // The machine's state directory went (the simulator stopped): nobody is left to read it.
      }
      // A machine restarted meanwhile forgot this engine: its exit is nobody's news.
      if (this.#byPid.get(p.pid) !== p) return;
      this.#byPid.delete(p.pid);
      if (this.#byPort.get(p.port) === p) this.#byPort.delete(p.port);
      if (this.#byShard.get(p.shardId) === p) this.#byShard.delete(p.shardId);
      for (const listener of p.onExit) listener(code, signal);
    })();
  }
}

/** `http://host:port/path…`: the port and the path. */
const URL_PARTS = /^https?:\/\/(?:\[[^\]]*\]|[^/:]*):(\d+)(\/[^?#]*)?/;

/**
 * The `engines` section of a simulated node's agent config: the simulated
 * engine under every engine name a catalog may use, probed, polled and
 * drained as the real agent does any engine. With `engineHttp`, the nodes
 * share this machine's ports: each takes its own slice of them.
 */
export function simEnginesConfig(c: SimConfig, position: number): EnginesConfig {
  const perNode = Math.max(16, 2 * c.gpusPerNode);
  const first = c.engineHttp
    ? ENGINE_HTTP_PORTS + ((position * perNode) % (65_535 - ENGINE_HTTP_PORTS - perNode))
    : 8000;
  const engine: EngineConfig = engineSchema.parse({
    command: SIM_ENGINE_COMMAND,
    ready: {
      http: "http://127.0.0.1:{port}/health",
      // The agent's default; more often for engines that load in under a second or so
      // (--start-delay-ms of tests), so that RUNNING follows the start delay closely.
      intervalMs: Math.min(READY_INTERVAL_MS, Math.max(50, Math.round(c.startDelayMs / 5))),
    },
    drain: {
      http: "http://127.0.0.1:{port}/drain",
      // The simulated drain's length is drainMs: in-flight requests model the routers' grace.
      idleGraceMs: 0,
    },
    metrics: {
      // Load changes once per heartbeat period; with no load model an engine is idle, read rarely.
      intervalMs: c.load.length > 0 ? Math.min(60_000, Math.max(100, c.heartbeatMs)) : 60_000,
    },
    portRange: c.engineHttp ? [first, first + perNode - 1] : [8000, 8999],
  });
  // Any engine name the catalog gives runs the simulated engine.
  return new Proxy({} as EnginesConfig, {
    get: (_, name) => (typeof name === "string" ? engine : undefined),
    has: () => true,
    ownKeys: () => ["default"],
    getOwnPropertyDescriptor: () => ({ value: engine, enumerable: true, configurable: true }),
  });
}

/** Where nodes' engines listen with `engineHttp` (above the usual services, below the ephemeral ports). */
const ENGINE_HTTP_PORTS = 20_000;
