/**
 * The deterministic simulation's engines (`llmgw simulate`): the node
 * agent's engine supervisor (`ShardSupervisor`) with no process behind it,
 * on the simulation's clock (no real timer, no file, so a run is the same
 * for the same seed). `llmgw sim` runs the real supervisor over faked
 * processes instead (src/sim/supervised-engines.ts). A start is a state machine on timers — a start
 * delay, then RUNNING — bent by the node's fault plan (an engine that runs
 * out of memory at start, crash-loops, hangs while loading, loads slowly, is refused, never
 * comes back from its launch, or exits on its own), each fault's course in time being
 * `engineCourse` (src/sim/faults.ts), which the simulator's engine host
 * follows too; a launch that never comes back is never answered, as the
 * real supervisor's start is not, and a start re-sent meanwhile is
 * accepted, as there. A drain lasts `drainMs` or until its
 * deadline, and a running shard reports the load its model's curve gives.
 * Nothing is spawned, written or listened on: `engineHttp` is the
 * simulator's (src/sim/engine-host.ts), not the simulation's.
 *
 * It says what happens through `onEvent`, as the real supervisor does; the
 * real `NodeAgent` turns that into shard statuses.
 */
import type { AgentClock, TimerHandle } from "../agent/client/index.js";
import type {
  CommandOutcome,
  ShardEvent,
  ShardStartSpec,
  ShardSupervisor,
  SupervisedShard,
} from "../agent/node-agent.js";
import { type EngineCourse, engineCourse } from "../sim/faults.js";
import type {
  AgentSupervisor,
  PreloadedShard,
  SimMachineContext,
  SimMachineEngines,
  SimShard,
} from "../sim/machine-engines.js";

interface Engine extends SimShard {
  timers: Set<TimerHandle>;
}

export type SimEnginesOptions = SimMachineContext;

type Exit = { exitCode: number; error?: string; lastOutput?: string };

export class SimEngines implements ShardSupervisor, SimMachineEngines {
  readonly #o: SimEnginesOptions;
  readonly #engines = new Map<string, Engine>();
  readonly #clock: AgentClock;
  /**
   * Starts whose launch never returns (`never-starting`), by shard, as the
   * current agent process's supervisor knows them: a start re-sent for one
   * is answered at once (the first one would report), a stop or a drain of
   * one is accepted (the engine goes once it is up: never).
   */
  #launching = new Map<string, (o: CommandOutcome) => void>();
  /** Launches still hanging from agent processes gone since: answered when the machine goes. */
  readonly #orphaned: Array<(o: CommandOutcome) => void> = [];
  /** Where shard changes go (the node's current agent). */
  onEvent: (e: ShardEvent) => void = () => {};

  constructor(opts: SimEnginesOptions) {
    this.#o = opts;
    // A real clock here would make a run differ from its replay.
    if (!opts.clock) throw new Error("the simulation's engines need the simulation's clock");
    this.#clock = opts.clock;
  }

  /** The machine's engines are their own supervisor, whichever agent process runs. */
  supervisorFor(onEvent: (e: ShardEvent) => void): AgentSupervisor {
    this.onEvent = onEvent;
    // A new agent process: the launches the one before was waiting for are not its own.
    this.#orphaned.push(...this.#launching.values());
    this.#launching = new Map();
    return { supervisor: this };
  }

  // --- ShardSupervisor ---------------------------------------------------------

  async start(spec: ShardStartSpec): Promise<CommandOutcome> {
    const existing = this.#engines.get(spec.shardId);
    if (existing) {
      // A re-issued start for a shard already here: accepted, and its state repeated.
      this.#say(existing);
      return { ok: true };
    }
    // A re-sent start while the first is still being launched: that one reports.
    if (this.#launching.has(spec.shardId)) return { ok: true };
    const course = engineCourse(
      this.#o.faults.shardFault(spec.engineArgs),
      this.#o.config,
      spec.gpuIndices[0] ?? 0,
    );
    if (course.launch === "refused") return { ok: false, error: course.error };
    if (course.launch === "never-returns")
      // The launch never returns (an image pull or a fork that hangs): the start is never answered.
      return new Promise((resolve) => this.#launching.set(spec.shardId, resolve));
    const e: Engine = {
      shardId: spec.shardId,
      replicaId: spec.replicaId,
      model: spec.model,
      profile: spec.profile,
      gpuIndices: [...spec.gpuIndices],
      state: "starting",
      rank: spec.rank,
      timers: new Set(),
    };
    this.#engines.set(e.shardId, e);
    this.#say(e);
    this.#run(e, course);
    return { ok: true };
  }

  /** The engine's course in time: RUNNING after its load, and an exit of its own if it has one. */
  #run(e: Engine, course: Extract<EngineCourse, { launch: "launched" }>): void {
    const { readyAfterMs, exit } = course;
    const exitNow = () => {
      if (!exit) return;
      this.#exit(e, exit.exitCode === 0 ? "stopped" : "failed", {
        exitCode: exit.exitCode,
        ...(exit.error ? { error: exit.error } : {}),
        lastOutput: exit.output,
      });
    };
    if (readyAfterMs === undefined) {
      // Stuck loading weights until someone stops it, or failing while loading.
      if (exit) this.#after(e, exit.afterMs, exitNow);
      return;
    }
    this.#after(e, readyAfterMs, () => {
      this.#to(e, "running");
      if (exit) this.#after(e, exit.afterMs, exitNow);
    });
  }

  async stop(shardId: string): Promise<CommandOutcome> {
    const e = this.#engines.get(shardId);
    if (!e) return this.#stopLaunching(shardId);
    this.#exit(e, "stopped", { exitCode: 0 });
    return { ok: true };
  }

  async drain(shardId: string, deadlineUnixMs: number): Promise<CommandOutcome> {
    const e = this.#engines.get(shardId);
    // Nothing serves yet, so nothing is in flight: the drain of a shard being launched is its stop.
    if (!e) return this.#stopLaunching(shardId);
    if (e.state === "draining") return { ok: true };
    this.#clearTimers(e);
    this.#to(e, "draining");
    // What is in flight takes drainMs to finish; an engine still busy at the
    // deadline exits then, cutting off the rest, and says so.
    const untilDeadline =
      deadlineUnixMs > 0 ? Math.max(0, deadlineUnixMs - this.#clock.now()) : Number.POSITIVE_INFINITY;
    const drainMs = this.#o.config.drainMs;
    if (untilDeadline >= drainMs) this.#after(e, drainMs, () => this.#exit(e, "stopped", { exitCode: 0 }));
    else
      this.#after(e, untilDeadline, () =>
        this.#exit(e, "stopped", {
          exitCode: 0,
          lastOutput: `INFO drain deadline ${new Date(deadlineUnixMs).toISOString()} passed with requests still in flight; exiting`,
        }),
      );
    return { ok: true };
  }

  /** A stop for a shard with no engine: accepted for one being launched (it would go once up), else unknown. */
  #stopLaunching(shardId: string): CommandOutcome {
    if (this.#launching.has(shardId)) return { ok: true };
    return { ok: false, error: `unknown shard ${JSON.stringify(shardId)}` };
  }

  shards(): SupervisedShard[] {
    return [...this.#engines.values()].map((e) => ({
      ...shardCopy(e),
      endpoint: e.state === "running" ? this.#endpoint(e) : "",
    }));
  }

  loads(): Array<{ shardId: string; queueDepth: number; kvCacheUse: number }> {
    const load = this.#o.load;
    if (!load) return [];
    const out: Array<{ shardId: string; queueDepth: number; kvCacheUse: number }> = [];
    for (const e of this.#engines.values()) {
      if (e.state !== "running") continue;
      const l = load(e);
      if (l) out.push({ shardId: e.shardId, ...l });
    }
    return out;
  }

  // --- the simulated machine ----------------------------------------------------

  /** Each engine's shard id and state, no copy made (`llmgw simulate` reads every node's every 5 simulated seconds). */
  forEachState(fn: (shardId: string, state: SimShard["state"]) => void): void {
    for (const e of this.#engines.values()) fn(e.shardId, e.state);
  }

  /** The engines now (a copy). */
  list(): SimShard[] {
    return [...this.#engines.values()].map((e) => ({ ...shardCopy(e), rank: e.rank }));
  }

  forEachLoaded(fn: (gpuIndices: readonly number[]) => void): void {
    for (const e of this.#engines.values())
      if (e.state === "running" || e.state === "draining") fn(e.gpuIndices);
  }

  /** Engines already running on the machine before the agent started: RUNNING at once. */
  preload(shards: readonly PreloadedShard[], gpuCount: number): void {
    for (const s of shards) {
      const gpuIndices = s.gpuIndices.filter((i) => i >= 0 && i < gpuCount);
      this.#engines.set(s.shardId, {
        ...s,
        gpuIndices,
        state: "running",
        rank: 0,
        timers: new Set(),
      });
    }
  }

  /** Nothing listens in the simulation: the preloaded engines are RUNNING as they are. */
  async servePreloaded(): Promise<void> {}

  /** GPU `index` fell off the bus: its engines die with it. */
  gpuFailed(index: number, problem: string): void {
    for (const e of [...this.#engines.values()])
      if (e.gpuIndices.includes(index))
        this.#exit(e, "failed", {
          exitCode: 1,
          error: `CUDA error: unspecified launch failure (${problem})`,
        });
  }

  /** The machine restarted: its engines are gone, unsaid (the agent after it finds none). */
  clear(): void {
    for (const e of this.#engines.values()) this.#release(e);
    this.#engines.clear();
    const hanging = [...this.#orphaned, ...this.#launching.values()];
    this.#orphaned.length = 0;
    this.#launching.clear();
    for (const answer of hanging) answer({ ok: false, error: "the machine restarted during the launch" });
  }

  /** The simulation stops: timers go. */
  close(): void {
    this.clear();
  }

  // --- state ----------------------------------------------------------------------

  #after(e: Engine, ms: number, fn: () => void): void {
    const t = this.#clock.setTimeout(() => {
      e.timers.delete(t);
      // The engine may have been stopped or replaced since.
      if (this.#engines.get(e.shardId) === e) fn();
    }, ms);
    e.timers.add(t);
  }

  #clearTimers(e: Engine): void {
    for (const t of e.timers) this.#clock.clearTimeout(t);
    e.timers.clear();
  }

  #release(e: Engine): void {
    this.#clearTimers(e);
  }

  #to(e: Engine, state: SimShard["state"]): void {
    e.state = state;
    this.#say(e);
  }

  /** The engine exited: the shard leaves the node and its memory is released. */
  #exit(e: Engine, state: "stopped" | "failed", exit: Exit): void {
    this.#release(e);
    this.#engines.delete(e.shardId);
    e.state = state;
    this.#say(e, exit);
  }

  /** Where the engine serves: a made-up address, one port per shard on the node from its first GPU. */
  #endpoint(e: Engine): string {
    return `http://${this.#o.nodeId}:${8000 + (e.gpuIndices[0] ?? 0)}`;
  }

  #say(e: Engine, exit?: Exit): void {
    this.onEvent({
      shardId: e.shardId,
      replicaId: e.replicaId,
      state: e.state,
      ...(e.state === "running" ? { endpoint: this.#endpoint(e) } : {}),
      ...(exit?.exitCode !== undefined ? { exitCode: exit.exitCode } : {}),
      ...(exit?.error ? { error: exit.error } : {}),
      ...(exit?.lastOutput ? { lastOutput: exit.lastOutput } : {}),
    });
  }
}

/** What an engine's shard and a supervised shard have in common, copied (its GPU list too). */
function shardCopy(e: Engine): Omit<SupervisedShard, "endpoint"> {
  const { shardId, replicaId, model, profile, state } = e;
  return { shardId, replicaId, model, profile, gpuIndices: [...e.gpuIndices], state };
}

/** The simulation's machines' engines (for `SimNode`'s `engines`). */
export function simulatedEngines(o: SimMachineContext): SimMachineEngines {
  return new SimEngines(o);
}
