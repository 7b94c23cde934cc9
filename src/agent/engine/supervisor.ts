/**
 * Runs inference engines for shards: one process group per shard, detached
 * so that engines outlive the agent, recorded under the state directory so
 * that a restarted agent adopts the ones still alive (PID and start time
 * both matching) instead of starting them again. Processes, ports and the
 * engines' HTTP go through an `EngineHost` (engine-host.ts): this machine's
 * by default.
 */
import { existsSync } from "node:fs";
import {
  chmod,
  type FileHandle,
  mkdir,
  open,
  readdir,
  readFile,
  rename,
  unlink,
  writeFile,
} from "node:fs/promises";
import { join } from "node:path";
import { launchIssues } from "../../engine-policy/index.js";
import type {
  CommandOutcome,
  ShardEvent,
  ShardStartSpec,
  ShardStateName,
  ShardSupervisor,
  SupervisedShard,
} from "../node-agent.js";
import type { EngineConfig, EnginesConfig } from "./config.js";
import { type EngineHost, osEngineHost } from "./engine-host.js";
import type { EngineOutput, EngineOutputSource } from "./engine-output.js";
import { readRecordedExit } from "./exit-recorder.js";
import { type EngineLoad, type LoadFailure, readEngineLoad } from "./load.js";
import { DEFAULT_ENGINE_LOGS, type EngineLogsConfig } from "./log-config.js";
import { EngineLogKeeper, FileEngineOutput, shardLogPath } from "./log-files.js";
import { idProblem } from "./shard-id.js";
import { fill, type TemplateValues } from "./template.js";

/** What the state directory keeps of a shard's engine. */
interface EngineRecord {
  spec: ShardStartSpec;
  pid: number;
  startTime: string;
  port: number;
  endpoint: string;
  state: ShardStateName;
  logPath: string;
}

/** The timers a shard's engine runs on; all cleared when it exits (unset: not running). */
interface ShardTimers {
  /** The ready probe while STARTING. */
  probe?: NodeJS.Timeout;
  /** An adopted engine (not our child): its exit, seen by its PID going away. */
  watch?: NodeJS.Timeout;
  /** SIGKILL after the stop grace. */
  killTimer?: NodeJS.Timeout;
  /** The drain's deadline. */
  drainTimer?: NodeJS.Timeout;
  /** Metrics readings (load). */
  loadTimer?: NodeJS.Timeout;
  /** While draining: stops it early once the engine is idle. */
  drainPoll?: NodeJS.Timeout;
  /** The health probe while RUNNING. */
  liveness?: NodeJS.Timeout;
}

interface Shard {
  record: EngineRecord;
  config: EngineConfig;
  /** Started by this agent process (its exit is heard), or adopted from an earlier one (its exit is watched for). */
  ours: boolean;
  stopping: boolean;
  timers: ShardTimers;
  exited: Promise<void>;
  markExited: () => void;
  /** Where this process's output starts in the log (what it printed is read from here). */
  logOffset: number;
  /** Started again on another port after its port was taken (once at most). */
  portRetried: boolean;
  /** The last reading of the engine's metrics; undefined when the last one failed. */
  load: EngineLoad | undefined;
  /** The last reading failed (said once per run of failures). */
  loadFailing: boolean;
  /** Restarts in place so far (this agent process). */
  restarts: number;
  /** What the exit means: said as usual, already said (an unhealthy engine reported FAILED), or a restart in place. */
  afterExit: "report" | "silent" | "restart";
  /** The record's writes, one after the other (they share a temporary file); settles when the last one has. */
  saving: Promise<void>;
}

/** A shard's load as heartbeats carry it. */
export interface ShardLoadReport {
  shardId: string;
  queueDepth: number;
  kvCacheUse: number;
}

export interface SupervisorOptions {
  engines: EnginesConfig;
  stateDir: string;
  /** Host in the endpoints engines serve on (http://<host>:<port>). */
  advertiseHost: string;
  onEvent: (e: ShardEvent) => void;
  /** Where PATH, HOME and LANG of every engine come from (default: the agent's environment). */
  baseEnv?: NodeJS.ProcessEnv;
  /** Where engines run: processes of this machine (the default), or a host that fakes them. */
  host?: EngineHost;
  /** Things operators should see that are no shard state (a start retried on another port). */
  warn?: (obj: object, msg: string) => void;
  /** An engine turned unhealthy after RUNNING, and what is done about it. */
  onUnhealthy?: (u: { shardId: string; reason: string; action: "replace" | "restart-in-place" }) => void;
  /** An engine's metrics could not be read (`first`: the first failure of a run of them). */
  onLoadFailure?: (f: { shardId: string; reason: LoadFailure; detail: string; first: boolean }) => void;
  /** How often an adopted engine (not our child) is checked for having exited. */
  watchMs?: number;
  /** Rotation and retention of the engines' logs (default: DEFAULT_ENGINE_LOGS). */
  logs?: EngineLogsConfig;
  /** A shard's log was rotated. */
  onLogRotated?: (shardId: string) => void;
  /** Removed shards' logs were deleted after their retention. */
  onLogsDeleted?: (shardIds: string[]) => void;
}

const LAST_LINES = 20;

/**
 * What an engine gets of the agent's environment: nothing else, so the
 * agent's credentials and settings (LLMGW_*, tokens, proxies) never reach
 * a process the catalog configures.
 */
export const INHERITED_ENV = ["PATH", "HOME", "LANG"] as const;

/**
 * How an engine says it could not bind its port. The engine is another
 * program: its output is all there is to go by (Python's
 * "[Errno 98] Address already in use", Node's EADDRINUSE, uvicorn's and
 * Rust's wording).
 */
const ADDRESS_IN_USE = /EADDRINUSE|address already in use|Errno 98/i;

export class EngineSupervisor implements ShardSupervisor, EngineOutputSource {
  readonly #o: SupervisorOptions;
  readonly #host: EngineHost;
  /** Rotates the live shards' logs and deletes removed shards' logs after their retention. */
  readonly #logKeeper: EngineLogKeeper;
  readonly #shards = new Map<string, Shard>();
  /**
   * Ports held for an engine from before the probe until its exit, so that
   * starts arriving together never pick the same one (an engine binds its
   * port only seconds after it is spawned).
   */
  readonly #reservedPorts = new Set<number>();
  /** Shards between a start's arrival and their process running (a re-sent start waits for nothing). */
  readonly #launching = new Set<string>();
  /**
   * Shards asked to stop (or drain) while being launched, a restart in place
   * included: their process is stopped as soon as it is up, or never
   * started, and they end STOPPED.
   */
  readonly #stopAsked = new Set<string>();
  #closed = false;

  constructor(o: SupervisorOptions) {
    this.#o = o;
    this.#host = o.host ?? osEngineHost;
    this.#logKeeper = new EngineLogKeeper({
      dir: this.#logsDir,
      config: o.logs ?? DEFAULT_ENGINE_LOGS,
      live: () => new Set([...this.#shards.keys(), ...this.#launching]),
      ...(o.onLogRotated ? { onRotated: o.onLogRotated } : {}),
      onDeleted: (shards) => {
        o.onLogsDeleted?.(shards);
        o.warn?.({ shards }, "deleted the logs of removed shards past their retention");
      },
      onError: (err) => o.warn?.({ err: String(err) }, "engine log rotation failed"),
    });
  }

  get #logsDir(): string {
    return join(this.#o.stateDir, "logs");
  }

  /**
   * A shard's output, for `llmgw logs`: from its log file, while it runs
   * and after it was removed until its retention ends. The id is checked
   * against the id rule before it names a file.
   */
  output(shardId: string): EngineOutput | undefined {
    const path = shardLogPath(this.#logsDir, shardId);
    if (path === undefined) return undefined;
    if (!this.#shards.has(shardId) && !existsSync(path)) return undefined;
    return new FileEngineOutput(path);
  }

  get #recordsDir(): string {
    return join(this.#o.stateDir, "shards");
  }

  /** Engines recorded by an earlier agent process that still run: re-attached, and returned. */
  async adopt(): Promise<SupervisedShard[]> {
    // Engine records, exit statuses and logs are the node's business only.
    for (const dir of [this.#o.stateDir, this.#recordsDir, this.#logsDir]) {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      await chmod(dir, 0o700);
    }
    const adopted: Shard[] = [];
    for (const name of await readdir(this.#recordsDir)) {
      if (!name.endsWith(".json")) continue;
      const path = join(this.#recordsDir, name);
      let record: EngineRecord;
      try {
        record = JSON.parse(await readFile(path, "utf8")) as EngineRecord;
      } catch {
        await removeIfPresent(path);
        continue;
      }
      const config = this.#o.engines[record.spec.engine];
      const alive = (await this.#host.startTime(record.pid)) === record.startTime;
      if (!alive || !config) {
        // Gone, or the PID now belongs to another process: never adopted.
        await removeIfPresent(path);
        continue;
      }
      const shard = this.#newShard(record, config, false, 0);
      this.#shards.set(record.spec.shardId, shard);
      this.#reservedPorts.add(record.port);
      this.#watchAdopted(shard);
      adopted.push(shard);
    }
    // A record may say STARTING of an engine that became ready while its
    // RUNNING record was still being written (see #ready): whether it is
    // ready is asked of the engine itself, once, all together, so that the
    // registration that follows says RUNNING of those that are.
    const ready = await Promise.all(
      adopted.map((s) => s.record.state === "starting" && this.#answersReady(s)),
    );
    adopted.forEach((shard, i) => {
      // Exited while the engines were asked: already reported, nothing to watch.
      if (!this.#holds(shard)) return;
      if (ready[i]) shard.record.state = "running";
      if (shard.record.state === "starting") this.#probe(shard);
      else if (shard.record.state === "running") {
        this.#pollLoad(shard);
        this.#watchLiveness(shard);
      }
    });
    if (!this.#closed) this.#logKeeper.start();
    return this.shards();
  }

  shards(): SupervisedShard[] {
    return [...this.#shards.values()].map(({ record: r }) => ({
      shardId: r.spec.shardId,
      replicaId: r.spec.replicaId,
      model: r.spec.model,
      profile: r.spec.profile,
      gpuIndices: [...r.spec.gpuIndices],
      state: r.state,
      endpoint: r.endpoint,
    }));
  }

  /**
   * The load of each RUNNING shard whose engine's metrics were read last
   * time: one that could not be read reports none (not zero).
   */
  loads(): ShardLoadReport[] {
    return [...this.#shards.values()].flatMap((s) =>
      s.record.state === "running" && s.load
        ? [{ shardId: s.record.spec.shardId, queueDepth: s.load.queueDepth, kvCacheUse: s.load.kvCacheUse }]
        : [],
    );
  }

  /** PIDs of the engines, by shard (for operators and tests). */
  pids(): Record<string, number> {
    return Object.fromEntries([...this.#shards].map(([id, s]) => [id, s.record.pid]));
  }

  async start(spec: ShardStartSpec): Promise<CommandOutcome> {
    const badId = idProblem("shard id", spec.shardId) ?? idProblem("replica id", spec.replicaId);
    if (badId) return { ok: false, error: badId };
    const existing = this.#shards.get(spec.shardId);
    if (existing && !existing.stopping) {
      // A re-sent start: accepted, no second process; its state said again.
      this.#emit(existing, existing.record.state);
      return { ok: true };
    }
    if (existing)
      return { ok: false, error: `shard ${spec.shardId} is stopping; start it again once it stopped` };
    // A re-sent start while the first is still being launched: that one reports.
    if (this.#launching.has(spec.shardId)) return { ok: true };
    const config = this.#o.engines[spec.engine];
    if (!config) {
      const names = Object.keys(this.#o.engines);
      return {
        ok: false,
        error: `engine ${JSON.stringify(spec.engine)} is not configured on this node (configured: ${names.join(", ") || "none"})`,
      };
    }
    // The catalog was checked at apply; a forged one was not: checked again here, before anything runs.
    const issues = launchIssues(spec.engineArgs, spec.engineEnv, config);
    if (issues.length > 0)
      return {
        ok: false,
        shardFailed: true,
        error: `start refused by this node's engine policy (engine ${JSON.stringify(spec.engine)}): ${issues.map((i) => `${i.path} ${i.message}`).join("; ")}`,
      };
    this.#launching.add(spec.shardId);
    if (!this.#closed) this.#logKeeper.start();
    try {
      return await this.#launch(spec, config, { avoidPort: undefined, portRetried: false });
    } finally {
      this.#launching.delete(spec.shardId);
      this.#stopAsked.delete(spec.shardId);
    }
  }

  /** The engine's environment: a clean one (see INHERITED_ENV), the node's engine env, the catalog's, the shard's GPUs. */
  #engineEnv(spec: ShardStartSpec, config: EngineConfig): NodeJS.ProcessEnv {
    const base = this.#o.baseEnv ?? process.env;
    const inherited = Object.fromEntries(
      INHERITED_ENV.flatMap((k) => (base[k] === undefined ? [] : [[k, base[k]]])),
    );
    return {
      ...inherited,
      ...config.env,
      ...spec.engineEnv,
      CUDA_VISIBLE_DEVICES: visibleDevices(spec),
      // CUDA numbers GPUs fastest first unless told otherwise; nvidia-smi, whose
      // indices the control plane places by, numbers them by PCI bus. Set
      // last: no other value may change which GPUs the engine sees.
      CUDA_DEVICE_ORDER: "PCI_BUS_ID",
    };
  }

  /** Reserves a port, spawns the engine on it and starts probing; the port is released again on any failure. */
  async #launch(
    spec: ShardStartSpec,
    config: EngineConfig,
    o: { avoidPort: number | undefined; portRetried: boolean; restarts?: number },
  ): Promise<CommandOutcome> {
    const port = await this.#reservePort(config.portRange, o.avoidPort);
    if (port === undefined)
      return { ok: false, error: `no free port in ${config.portRange[0]}-${config.portRange[1]}` };
    let launched = false;
    try {
      const values = templateValues(spec, port);
      const argv = [...config.command.map((t) => fill(t, values)), ...spec.engineArgs];
      const env = this.#engineEnv(spec, config);
      const logPath = join(this.#logsDir, `${spec.shardId}.log`);
      const exitPath = this.#exitPath(spec.shardId);
      const program = argv[0]!;
      // What must be true before the spawn, asked together and off the event
      // loop: the log opened (creating a file can take a disk's while), the
      // program found, a stale exit status removed. Starts arriving together
      // (a pass placing many shards on one node) queue in the thread pool, so
      // every file operation before the spawn delays the engines behind it.
      const [opened, found, cleared] = await Promise.allSettled([
        openLog(logPath),
        this.#host.executable(program, env.PATH),
        removeIfPresent(exitPath),
      ]);
      if (opened.status === "rejected")
        return {
          ok: false,
          error: `cannot open the engine log ${logPath}: ${(opened.reason as Error).message}`,
        };
      const log = opened.value.handle;
      const logOffset = opened.value.offset;
      let spawned: Awaited<ReturnType<EngineHost["spawn"]>>;
      try {
        if (cleared.status === "rejected") throw cleared.reason;
        if (found.status === "rejected") throw found.reason;
        if (!found.value)
          return {
            ok: false,
            error: `cannot start ${program}: not an executable file (PATH=${env.PATH ?? ""})`,
          };
        spawned = await this.#host.spawn({ argv, env, logFd: log.fd, logPath, exitPath });
      } finally {
        // The engine holds its own copy of the descriptor once spawned: closing ours waits for nothing.
        log.close().catch(() => {});
      }
      if (!spawned.ok) return { ok: false, error: spawned.error };
      // The ready probe's grid starts here: the engine's load counts from its spawn.
      const spawnedAt = performance.now();
      const pid = spawned.pid;
      const record: EngineRecord = {
        spec,
        pid,
        // Read with the record's first write, below: the report does not wait for it.
        startTime: "",
        port,
        endpoint: `http://${this.#o.advertiseHost}:${port}`,
        state: "starting",
        logPath,
      };
      const shard = this.#newShard(record, config, true, logOffset);
      shard.portRetried = o.portRetried;
      shard.restarts = o.restarts ?? 0;
      this.#shards.set(spec.shardId, shard);
      launched = true;
      spawned.onExit((code, signal) => void this.#exited(shard, code, signal));
      // STARTING is said as soon as the engine runs; its record (what a
      // restarted agent adopts it by) is written right after, off the report's
      // way. An agent lost in between leaves the engine unrecorded, as one
      // lost between the spawn and the record always did.
      this.#emit(shard, "starting");
      this.#persist(shard, async () => {
        record.startTime = (await this.#host.startTime(pid)) ?? "";
      });
      this.#probe(shard, spawnedAt);
      // Asked to stop while it was being launched: it goes at once, and says STOPPED when it exited.
      if (this.#stopAsked.delete(spec.shardId)) this.#terminate(shard);
      return { ok: true };
    } finally {
      if (!launched) this.#reservedPorts.delete(port);
    }
  }

  async stop(shardId: string): Promise<CommandOutcome> {
    const shard = this.#shards.get(shardId);
    if (!shard) return this.#stopLaunching(shardId);
    this.#cancelRestart(shard);
    this.#terminate(shard);
    return { ok: true };
  }

  /**
   * A stop for a shard with no process right now: one being launched (a
   * start, or a restart in place between its old process and its new one)
   * is stopped as soon as its process is up, or never started.
   */
  #stopLaunching(shardId: string): CommandOutcome {
    if (!this.#launching.has(shardId))
      return { ok: false, error: `unknown shard ${JSON.stringify(shardId)}` };
    this.#stopAsked.add(shardId);
    return { ok: true };
  }

  /** A restart in place under way is called off: the old process, stopping already, is not started again, and its exit says STOPPED. */
  #cancelRestart(shard: Shard): void {
    if (shard.afterExit === "restart") shard.afterExit = "report";
  }

  async drain(shardId: string, deadlineUnixMs: number): Promise<CommandOutcome> {
    const shard = this.#shards.get(shardId);
    // Nothing serves yet, so nothing is in flight: the drain of a shard being launched is its stop.
    if (!shard) return this.#stopLaunching(shardId);
    this.#cancelRestart(shard);
    if (shard.record.state === "draining" || shard.stopping) return { ok: true };
    shard.record.state = "draining";
    clearInterval(shard.timers.probe);
    clearInterval(shard.timers.loadTimer);
    clearInterval(shard.timers.liveness);
    await this.#persist(shard);
    // DRAINING takes the shard out of the routing table: the idle grace counts from here.
    this.#emit(shard, "draining");
    const drainedAt = Date.now();
    const { drain, metrics } = shard.config;
    if (drain.http) {
      const url = fill(drain.http, this.#values(shard));
      // The hook is advice to the engine; the deadline below stops it regardless.
      this.#host.fetch(url, { method: drain.method, signal: AbortSignal.timeout(5000) }).catch(() => {});
    }
    // No deadline given (older control planes): the grace the engine has for a stop.
    const untilDeadline =
      deadlineUnixMs > 0 ? Math.max(0, deadlineUnixMs - Date.now()) : shard.config.stopGraceSeconds * 1000;
    shard.timers.drainTimer = setTimeout(() => this.#terminate(shard), untilDeadline);
    if (this.#servesHttp(shard)) {
      // Stopped early once idle: nothing running or waiting, and routers moved on.
      const url = fill(metrics.http, this.#values(shard));
      let busy = false;
      shard.timers.drainPoll = setInterval(
        async () => {
          if (busy || this.#closed || shard.stopping) return;
          busy = true;
          try {
            const r = await readEngineLoad(url, metrics, metrics.timeoutMs, this.#host.fetch);
            const idle = r.ok && r.load.running === 0 && r.load.queueDepth === 0;
            if (idle && Date.now() - drainedAt >= drain.idleGraceMs) {
              this.#o.warn?.({ shard: shardId }, "drained engine idle: stopping it before the deadline");
              this.#terminate(shard);
            }
          } finally {
            busy = false;
          }
        },
        Math.min(metrics.intervalMs, 250),
      );
    }
    return { ok: true };
  }

  /** Stops probes and watches; engines keep running (they outlive the agent). */
  async close(): Promise<void> {
    this.#closed = true;
    this.#logKeeper.stop();
    for (const s of this.#shards.values()) this.#clearTimers(s);
    // The records are the next agent's to read: none left half written.
    await Promise.all([...this.#shards.values()].map((s) => s.saving));
  }

  /** Stops every engine and waits for them: for tests and a node being emptied. */
  async stopAll(): Promise<void> {
    const all = [...this.#shards.values()];
    for (const s of all) this.#terminate(s);
    await Promise.all(all.map((s) => s.exited));
  }

  // --- internals --------------------------------------------------------------

  #newShard(record: EngineRecord, config: EngineConfig, ours: boolean, logOffset: number): Shard {
    let markExited = () => {};
    const exited = new Promise<void>((r) => {
      markExited = r;
    });
    return {
      record,
      config,
      ours,
      stopping: false,
      timers: {},
      exited,
      markExited,
      logOffset,
      portRetried: false,
      load: undefined,
      loadFailing: false,
      restarts: 0,
      afterExit: "report",
      saving: Promise.resolve(),
    };
  }

  #values(shard: Shard): TemplateValues {
    return templateValues(shard.record.spec, shard.record.port);
  }

  /**
   * Probes a STARTING engine until it answers 200, at `from` + k × the
   * interval (k = 1, 2, …) by the clock: an interval timer is rearmed from
   * whenever it fired, so on a busy event loop (a node starting many engines
   * at once) each late firing would push every later probe back, and the
   * probe that finds an engine ready would come later and later after it.
   * A probe that outlasts its slot skips the slots it missed.
   */
  #probe(shard: Shard, from = performance.now()): void {
    // A launch or an adoption that finishes after close() arms nothing: its timers would outlive the supervisor.
    if (this.#closed) return;
    if (!this.#servesHttp(shard)) {
      // Not probed: rank 0's readiness speaks for the replica.
      this.#ready(shard);
      return;
    }
    const { intervalMs } = shard.config.ready;
    let slot = 0;
    const next = () => {
      // Also a shard that exited meanwhile (replaced by a launch on another port): its probe ends.
      if (this.#closed || shard.stopping || shard.record.state !== "starting" || !this.#holds(shard)) return;
      const now = performance.now();
      slot = Math.max(slot + 1, Math.ceil((now - from) / intervalMs));
      // A millisecond more: a timer's clock counts whole milliseconds and may fire
      // just before its time, and a probe must not come before its slot.
      shard.timers.probe = setTimeout(probe, from + slot * intervalMs - now + 1);
    };
    const probe = async () => {
      if (this.#closed) return;
      // Not answering yet: loading weights.
      if (await this.#answersReady(shard)) this.#ready(shard);
      else next();
    };
    next();
  }

  #ready(shard: Shard): void {
    if (shard.record.state !== "starting" || shard.stopping || !this.#holds(shard)) return;
    clearTimeout(shard.timers.probe);
    // Said at once, and written after: a record's write costs a file's
    // creation (its temporary file), which a node whose engines all become
    // ready together would otherwise pay per engine on the way to serving.
    // The record says RUNNING so that a restarted agent watches the engine's
    // liveness (a hung one is reported FAILED) instead of waiting for it
    // as for one loading.
    this.#emit(shard, "running");
    void this.#persist(shard);
    this.#pollLoad(shard);
    this.#watchLiveness(shard);
  }

  /** Whether `shard` is still the one this supervisor holds under its id (not exited, not replaced). */
  #holds(shard: Shard): boolean {
    return this.#shards.get(shard.record.spec.shardId) === shard;
  }

  /**
   * Whether the engine answers its ready URL with 200 now: the probe of a
   * starting engine, and an adopting agent's one question. A rank > 0 whose
   * readiness rank 0 speaks for does, as at its launch.
   */
  async #answersReady(shard: Shard): Promise<boolean> {
    if (!this.#servesHttp(shard)) return true;
    try {
      const url = fill(shard.config.ready.http, this.#values(shard));
      const r = await this.#host.fetch(url, { signal: AbortSignal.timeout(shard.config.ready.timeoutMs) });
      await r.body?.cancel();
      return r.status === 200;
    } catch {
      return false;
    }
  }

  /** The ready probe, again, for as long as the shard is RUNNING. */
  #watchLiveness(shard: Shard): void {
    if (this.#closed) return;
    if (!this.#servesHttp(shard)) return;
    const { liveness } = shard.config;
    const url = fill(shard.config.ready.http, this.#values(shard));
    let failures = 0;
    let busy = false;
    shard.timers.liveness = setInterval(async () => {
      if (busy || this.#closed || shard.stopping || shard.record.state !== "running") return;
      busy = true;
      let why: string | undefined;
      try {
        const r = await this.#host.fetch(url, { signal: AbortSignal.timeout(liveness.timeoutMs) });
        await r.body?.cancel();
        if (r.status !== 200) why = `${url} answered ${r.status}`;
      } catch (err) {
        why =
          err instanceof DOMException && err.name === "TimeoutError"
            ? `${url} did not answer within ${liveness.timeoutMs} ms`
            : `${url}: ${err instanceof Error ? err.message : String(err)}`;
      } finally {
        busy = false;
      }
      if (why === undefined) {
        failures = 0;
        return;
      }
      failures++;
      if (failures >= liveness.failureThreshold && shard.record.state === "running" && !shard.stopping)
        this.#unhealthy(shard, `health probe failed ${failures} times in a row (last: ${why})`);
    }, liveness.intervalMs);
  }

  /**
   * An engine that stopped answering its health while its process lives:
   * out of the routing table at once (FAILED, or STARTING again for a
   * restart in place), then stopped — to be placed again, or restarted.
   */
  #unhealthy(shard: Shard, reason: string): void {
    clearInterval(shard.timers.liveness);
    const { restartPolicy, maxRestarts } = shard.config;
    const inPlace = restartPolicy === "restart-in-place" && shard.restarts < maxRestarts;
    const shardId = shard.record.spec.shardId;
    this.#o.onUnhealthy?.({ shardId, reason, action: inPlace ? "restart-in-place" : "replace" });
    if (inPlace) {
      shard.afterExit = "restart";
      this.#emit(shard, "starting", {
        error: `unhealthy, restarting in place (${shard.restarts + 1} of ${maxRestarts}): ${reason}`,
      });
    } else {
      shard.afterExit = "silent";
      const exhausted =
        restartPolicy === "restart-in-place" ? ` (after ${maxRestarts} restarts in place)` : "";
      this.#emit(shard, "failed", { exitCode: -1, error: `unhealthy${exhausted}: ${reason}` });
    }
    this.#terminate(shard);
  }

  /** Whether the shard's engine serves HTTP (a rank > 0 probed through rank 0 does not). */
  #servesHttp(shard: Shard): boolean {
    return !(shard.config.ready.ranks === "first" && shard.record.spec.rank > 0);
  }

  /** Reads a RUNNING engine's metrics every interval, for heartbeats. */
  #pollLoad(shard: Shard): void {
    if (this.#closed) return;
    if (!this.#servesHttp(shard)) return;
    const { metrics } = shard.config;
    const url = fill(metrics.http, this.#values(shard));
    let busy = false;
    const read = async () => {
      if (busy || this.#closed || shard.record.state !== "running") return;
      busy = true;
      try {
        const r = await readEngineLoad(url, metrics, metrics.timeoutMs, this.#host.fetch);
        if (r.ok) {
          shard.load = r.load;
          shard.loadFailing = false;
          return;
        }
        shard.load = undefined;
        this.#o.onLoadFailure?.({
          shardId: shard.record.spec.shardId,
          reason: r.reason,
          detail: r.detail,
          first: !shard.loadFailing,
        });
        shard.loadFailing = true;
      } finally {
        busy = false;
      }
    };
    void read();
    shard.timers.loadTimer = setInterval(read, metrics.intervalMs);
  }

  /**
   * An adopted engine is not our child: its exit is seen by its PID going
   * away, and its status read from what its wrapper recorded.
   */
  #watchAdopted(shard: Shard): void {
    if (this.#closed) return;
    shard.timers.watch = setInterval(async () => {
      if ((await this.#host.startTime(shard.record.pid)) !== shard.record.startTime) {
        clearInterval(shard.timers.watch);
        const code = await readRecordedExit(this.#exitPath(shard.record.spec.shardId));
        await this.#exited(shard, code ?? null, null);
      }
    }, this.#o.watchMs ?? 500);
  }

  #exitPath(shardId: string): string {
    return join(this.#recordsDir, `${shardId}.exit`);
  }

  #terminate(shard: Shard): void {
    if (shard.stopping) return;
    shard.stopping = true;
    clearTimeout(shard.timers.drainTimer);
    clearInterval(shard.timers.drainPoll);
    clearInterval(shard.timers.loadTimer);
    clearInterval(shard.timers.liveness);
    clearInterval(shard.timers.probe);
    this.#signal(shard, "SIGTERM");
    shard.timers.killTimer = setTimeout(
      () => this.#signal(shard, "SIGKILL"),
      shard.config.stopGraceSeconds * 1000,
    );
  }

  #signal(shard: Shard, signal: NodeJS.Signals): void {
    // The whole group: an engine's workers go with it.
    this.#host.signalGroup(shard.record.pid, signal);
  }

  async #exited(shard: Shard, code: number | null, signal: NodeJS.Signals | null): Promise<void> {
    if (this.#shards.get(shard.record.spec.shardId) !== shard) return;
    this.#clearTimers(shard);
    const shardId = shard.record.spec.shardId;
    this.#shards.delete(shardId);
    this.#reservedPorts.delete(shard.record.port);
    // From here to its new process, a restart in place is a launch: a stop meanwhile calls it off (#stopLaunching).
    const restart = shard.afterExit === "restart" && !this.#closed;
    if (restart) this.#launching.add(shardId);
    if (this.#closed) {
      // The agent is going away: the records are the next agent's to read.
      shard.markExited();
      return;
    }
    const lastOutput = await lastLines(shard.record.logPath);
    // A record write still under way would otherwise put the record back after its removal.
    await shard.saving;
    await removeIfPresent(join(this.#recordsDir, `${shard.record.spec.shardId}.json`));
    await removeIfPresent(this.#exitPath(shard.record.spec.shardId));
    shard.markExited();
    if (shard.afterExit === "silent") return;
    if (restart) {
      let r: CommandOutcome | undefined;
      try {
        // Stopped while its old process was going: not started again.
        if (!this.#stopAsked.has(shardId))
          r = await this.#launch(shard.record.spec, shard.config, {
            avoidPort: undefined,
            portRetried: false,
            restarts: shard.restarts + 1,
          });
      } finally {
        this.#launching.delete(shardId);
      }
      if (this.#stopAsked.delete(shardId) || r === undefined)
        this.#emit(shard, "stopped", { exitCode: code ?? 0, lastOutput });
      else if (!r.ok)
        this.#emit(shard, "failed", { exitCode: code ?? -1, error: `restart in place failed: ${r.error}` });
      return;
    }
    // Asked to stop or to drain: however it ended, it ended as asked (an
    // engine that finished its drain and exited by itself is no crash).
    if (shard.stopping || shard.record.state === "draining") {
      this.#emit(shard, "stopped", { exitCode: code ?? 0, lastOutput });
      return;
    }
    if (await this.#retryOnAnotherPort(shard, code)) return;
    const error =
      code === null && signal === null
        ? "the engine was killed while the agent was not its parent (no exit status recorded)"
        : signal
          ? `the engine was killed by ${signal}`
          : code !== null && code > 128 && code <= 128 + 64
            ? `the engine exited with status ${code} (killed by signal ${code - 128})`
            : `the engine exited with code ${code}`;
    this.#emit(shard, "failed", { exitCode: code ?? -1, error, lastOutput });
  }

  /**
   * An engine that could not bind its port while starting lost a race with
   * some other process, not a fight with its model: started once more on
   * another port instead of being reported a crash. True when it was.
   */
  async #retryOnAnotherPort(shard: Shard, code: number | null): Promise<boolean> {
    const { spec, port, state } = shard.record;
    if (shard.portRetried || state !== "starting" || !shard.ours || code === 0) return false;
    if (!ADDRESS_IN_USE.test(await readFrom(shard.record.logPath, shard.logOffset))) return false;
    if (this.#launching.has(spec.shardId)) return false;
    this.#o.warn?.(
      { shard: spec.shardId, port },
      "the engine found its port taken while starting; starting it once more on another port",
    );
    this.#launching.add(spec.shardId);
    let r: CommandOutcome;
    try {
      r = await this.#launch(spec, shard.config, { avoidPort: port, portRetried: true });
    } finally {
      this.#launching.delete(spec.shardId);
    }
    if (!r.ok) this.#emit(shard, "failed", { exitCode: code ?? -1, error: r.error });
    return true;
  }

  #clearTimers(s: Shard): void {
    // clearTimeout clears intervals too (one kind of handle in Node).
    for (const t of Object.values(s.timers)) clearTimeout(t);
  }

  #emit(
    shard: Shard,
    state: ShardStateName,
    extra: { exitCode?: number; error?: string; lastOutput?: string } = {},
  ): void {
    shard.record.state = state;
    this.#o.onEvent({
      shardId: shard.record.spec.shardId,
      replicaId: shard.record.spec.replicaId,
      state,
      ...(state === "running" ? { endpoint: shard.record.endpoint } : {}),
      ...extra,
    });
  }

  /**
   * Writes the shard's record as it is now, after any write of it still
   * under way (`before` first, in turn). A write that fails is said, not
   * thrown: the engine runs either way, and the next write may succeed.
   */
  #persist(shard: Shard, before?: () => Promise<void>): Promise<void> {
    shard.saving = shard.saving
      .then(async () => {
        await before?.();
        await this.#write(shard);
      })
      .catch((err: unknown) =>
        this.#o.warn?.(
          { shard: shard.record.spec.shardId, err: String(err) },
          "the engine's record could not be written: an agent restarted now would not adopt the engine",
        ),
      );
    return shard.saving;
  }

  async #write(shard: Shard): Promise<void> {
    const path = join(this.#recordsDir, `${shard.record.spec.shardId}.json`);
    const tmp = `${path}.tmp`;
    // Written whole then renamed: a record is never read half written after a crash.
    await writeFile(tmp, JSON.stringify(shard.record), { mode: 0o600 });
    await rename(tmp, path);
  }

  /**
   * The first port of the range that no engine of ours holds and nothing
   * else listens on, reserved before it is probed: a start arriving
   * meanwhile moves on to the next one. A port some other program holds is
   * skipped (and probed again next time: it may have been freed).
   */
  async #reservePort([from, to]: [number, number], avoid: number | undefined): Promise<number | undefined> {
    for (let p = from; p <= to; p++) {
      if (p === avoid || this.#reservedPorts.has(p)) continue;
      this.#reservedPorts.add(p);
      if (await this.#host.portFree(p)) return p;
      this.#reservedPorts.delete(p);
    }
    return undefined;
  }
}

/**
 * The shard's GPUs as CUDA is to see them: by UUID, which stays with its GPU
 * when the driver numbers the GPUs anew (one lost, replaced or reset), where
 * an index may then name another GPU. By index only when a UUID is not known
 * (a GPU source without them, or an engine recorded by an older agent).
 */
export function visibleDevices(s: Pick<ShardStartSpec, "gpuIndices" | "gpuUuids">): string {
  const uuids = s.gpuUuids ?? [];
  return uuids.length === s.gpuIndices.length && uuids.every((u) => u !== "")
    ? uuids.join(",")
    : s.gpuIndices.join(",");
}

function templateValues(s: ShardStartSpec, port: number): TemplateValues {
  return {
    model: s.model,
    port: String(port),
    gpu_count: String(s.gpuIndices.length),
    gpu_indices: s.gpuIndices.join(","),
    gpu_uuids: visibleDevices(s),
    rank: String(s.rank),
    world_size: String(s.worldSize),
    master_addr: s.masterAddr,
    master_port: String(s.masterPort),
    shard_id: s.shardId,
    replica_id: s.replicaId,
  };
}

/**
 * Deletes a file that may not exist: one unlink (fs's rm with `force` looks
 * the path up first, a second system call per file).
 */
async function removeIfPresent(path: string): Promise<void> {
  try {
    await unlink(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
}

/** An engine's log opened for appending, and where this run's output starts in it. */
async function openLog(path: string): Promise<{ handle: FileHandle; offset: number }> {
  const handle = await open(path, "a", 0o600);
  try {
    return { handle, offset: (await handle.stat()).size };
  } catch (err) {
    await handle.close().catch(() => {});
    throw err;
  }
}

/** The last lines an engine printed (its log file's tail). */
async function lastLines(path: string): Promise<string> {
  try {
    const f = await open(path, "r");
    try {
      const { size } = await f.stat();
      const length = Math.min(size, 16_384);
      const buf = Buffer.alloc(length);
      await f.read(buf, 0, length, size - length);
      return buf.toString("utf8").trimEnd().split("\n").slice(-LAST_LINES).join("\n");
    } finally {
      await f.close();
    }
  } catch {
    return "";
  }
}

/** What a log holds from `offset` on (at most its last 64 KiB). */
async function readFrom(path: string, offset: number): Promise<string> {
  try {
    const f = await open(path, "r");
    try {
      const { size } = await f.stat();
      const start = Math.max(offset, size - 65_536);
      const buf = Buffer.alloc(Math.max(0, size - start));
      await f.read(buf, 0, buf.length, start);
      return buf.toString("utf8");
    } finally {
      await f.close();
    }
  } catch {
    return "";
  }
}
