/**
 * The deterministic simulation's engines (`llmgw simulate`): the node
 * agent's engine supervisor (`ShardSupervisor`) with no process behind it,
 * on the simulation's clock (no real timer, no file, so a run is the same
 * for the same seed). `llmgw sim` runs the real supervisor over faked
 * processes instead (src/sim/supervised-engines.ts). A start is a state machine on timers — a start
 * delay, then RUNNING — bent by the node's fault plan (an engine that runs
 * out of memory at start, crash-loops, hangs while loading, loads slowly, is refused, never
 * comes up, or exits on its own), a drain lasts `drainMs` or until its
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
import {
  CRASH_ERROR,
  CRASH_EXIT_CODE,
  oomError,
  REFUSE_START_ERROR,
  type ShardFault,
  SLOW_START_FACTOR,
  UNASKED_EXIT_OUTPUT,
} from "../sim/faults.js";
import type {
  AgentSupervisor,
  PreloadedShard,
  SimMachineContext,
  SimMachineEngines,
  SimShard,
} from "../sim/machine-engines.js";

interface Engine extends SimShard {
  /** The fault of an engine that was launched (refused and never-started ones never get here). */
  fault: Exclude<ShardFault, "refuse-start" | "never-starting"> | undefined;
  timers: Set<TimerHandle>;
}

export type SimEnginesOptions = SimMachineContext;

type Exit = { exitCode: number; error?: string; lastOutput?: string };

export class SimEngines implements ShardSupervisor, SimMachineEngines {
  readonly #o: SimEnginesOptions;
  readonly #engines = new Map<string, Engine>();
  readonly #clock: AgentClock;
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
    const fault = this.#o.faults.shardFault(spec.engineArgs);
    if (fault === "refuse-start") return { ok: false, error: REFUSE_START_ERROR };
    // Acknowledged, and then nothing: the engine process never came up.
    if (fault === "never-starting") return { ok: true };
    const e: Engine = {
      shardId: spec.shardId,
      replicaId: spec.replicaId,
      model: spec.model,
      profile: spec.profile,
      gpuIndices: [...spec.gpuIndices],
      state: "starting",
      rank: spec.rank,
      fault,
      timers: new Set(),
    };
    this.#engines.set(e.shardId, e);
    this.#say(e);
    const c = this.#o.config;
    switch (e.fault) {
      case "hang":
        break; // Stuck loading weights until someone stops it.
      case "fail": {
        const { error, output } = oomError(e.gpuIndices[0] ?? 0, c.gpuMemoryMb, c.kvCacheFraction);
        this.#after(e, Math.min(c.failAfterMs, c.startDelayMs), () =>
          this.#exit(e, "failed", { error, exitCode: 1, lastOutput: output }),
        );
        break;
      }
      case "crash-loop":
        this.#after(e, c.startDelayMs, () => {
          this.#to(e, "running");
          this.#after(e, c.crashAfterMs, () =>
            this.#exit(e, "failed", {
              error: CRASH_ERROR,
              exitCode: CRASH_EXIT_CODE,
              lastOutput: `${CRASH_ERROR}\nAborted (core dumped)`,
            }),
          );
        });
        break;
      case "exit-after-running":
        this.#after(e, c.startDelayMs, () => {
          this.#to(e, "running");
          this.#after(e, c.crashAfterMs, () =>
            this.#exit(e, "stopped", { exitCode: 0, lastOutput: UNASKED_EXIT_OUTPUT }),
          );
        });
        break;
      case "slow-start":
        this.#after(e, c.startDelayMs * SLOW_START_FACTOR, () => this.#to(e, "running"));
        break;
      case undefined:
        this.#after(e, c.startDelayMs, () => this.#to(e, "running"));
        break;
      default: {
        const never: never = e.fault;
        throw new Error(`unhandled fault ${String(never)}`);
      }
    }
    return { ok: true };
  }

  async stop(shardId: string): Promise<CommandOutcome> {
    const e = this.#engines.get(shardId);
    if (!e) return { ok: false, error: `unknown shard ${JSON.stringify(shardId)}` };
    this.#exit(e, "stopped", { exitCode: 0 });
    return { ok: true };
  }

  async drain(shardId: string, deadlineUnixMs: number): Promise<CommandOutcome> {
    const e = this.#engines.get(shardId);
    if (!e) return { ok: false, error: `unknown shard ${JSON.stringify(shardId)}` };
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
        fault: undefined,
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
