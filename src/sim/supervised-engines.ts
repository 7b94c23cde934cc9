/**
 * A simulated machine's engines under the real engine supervisor
 * (`EngineSupervisor`, the code a GPU machine runs): each agent process gets
 * its own supervisor over the machine's `SimEngineHost`, with the machine's
 * state directory for its engine records and logs, so that port
 * reservation, start and liveness probes, metrics polling, drains that end
 * when idle, adoption after an agent restart and exit reporting are the
 * real agent's.
 */
import { DEFAULT_ENGINE_LOGS, EngineSupervisor } from "../agent/engine/index.js";
import type { ShardEvent, ShardStartSpec } from "../agent/node-agent.js";
import { SimEngineHost, simEnginesConfig } from "./engine-host.js";
import type {
  AgentSupervisor,
  PreloadedShard,
  SimMachineContext,
  SimMachineEngines,
  SimShard,
} from "./machine-engines.js";

/** The simulated engines write a few lines each: their logs need no frequent size check. */
const SIM_ENGINE_LOGS = { ...DEFAULT_ENGINE_LOGS, checkIntervalMs: 600_000 };

export class SupervisedSimEngines implements SimMachineEngines {
  readonly #o: SimMachineContext & { stateDir: string };
  readonly #host: SimEngineHost;
  /** The current agent process's supervisor. */
  #current: EngineSupervisor | undefined;
  #preloaded: PreloadedShard[] = [];

  constructor(o: SimMachineContext) {
    if (o.stateDir === undefined) throw new Error(`simulated node ${o.nodeId} needs a state directory`);
    this.#o = { ...o, stateDir: o.stateDir };
    this.#host = new SimEngineHost({
      nodeId: o.nodeId,
      config: o.config,
      faults: o.faults,
      ...(o.load ? { load: o.load } : {}),
    });
  }

  supervisorFor(onEvent: (e: ShardEvent) => void): AgentSupervisor {
    const supervisor = this.#supervisor(onEvent);
    this.#current = supervisor;
    return {
      supervisor,
      adopt: () => supervisor.adopt(),
      close: () => supervisor.close(),
    };
  }

  list(): SimShard[] {
    const now = this.#current?.shards() ?? [];
    return now.map(({ endpoint: _, ...s }) => ({ ...s, rank: this.#host.engine(s.shardId)?.rank ?? 0 }));
  }

  forEachState(fn: (shardId: string, state: SimShard["state"]) => void): void {
    for (const s of this.#current?.shards() ?? []) fn(s.shardId, s.state);
  }

  forEachLoaded(fn: (gpuIndices: readonly number[]) => void): void {
    this.#host.forEachLoaded(fn);
  }

  gpuFailed(index: number, problem: string): void {
    this.#host.gpuFailed(index, problem);
  }

  preload(shards: readonly PreloadedShard[], gpuCount: number): void {
    this.#preloaded = shards.map((s) => ({
      ...s,
      gpuIndices: s.gpuIndices.filter((i) => i >= 0 && i < gpuCount),
    }));
  }

  /**
   * The preloaded engines are started by an agent process before the
   * simulator's: they are RUNNING and recorded when the first agent starts,
   * which adopts them as any restarted agent does.
   */
  async servePreloaded(): Promise<void> {
    const shards = this.#preloaded;
    this.#preloaded = [];
    if (shards.length === 0) return;
    this.#host.preload(shards.map((s) => s.shardId));
    const waiting = new Set(shards.map((s) => s.shardId));
    let allRunning!: () => void;
    const running = new Promise<void>((resolve) => {
      allRunning = resolve;
    });
    const earlier = this.#supervisor((e) => {
      if (e.state === "running" || e.state === "failed" || e.state === "stopped") waiting.delete(e.shardId);
      if (waiting.size === 0) allRunning();
    });
    await earlier.adopt();
    for (const s of shards) {
      const r = await earlier.start(preloadedSpec(s));
      if (!r.ok) throw new Error(`cannot preload shard ${s.shardId} on ${this.#o.nodeId}: ${r.error}`);
    }
    await running;
    await earlier.close();
  }

  clear(): void {
    this.#host.clear();
  }

  async close(): Promise<void> {
    await this.#current?.close();
    this.#host.clear();
  }

  #supervisor(onEvent: (e: ShardEvent) => void): EngineSupervisor {
    const { config: c } = this.#o;
    return new EngineSupervisor({
      engines: simEnginesConfig(c, this.#o.position),
      stateDir: this.#o.stateDir,
      advertiseHost: c.engineHttp
        ? c.engineHost.includes(":")
          ? `[${c.engineHost}]`
          : c.engineHost
        : this.#o.nodeId,
      onEvent,
      baseEnv: {},
      host: this.#host,
      logs: SIM_ENGINE_LOGS,
    });
  }
}

function preloadedSpec(s: PreloadedShard): ShardStartSpec {
  return {
    shardId: s.shardId,
    replicaId: s.replicaId,
    model: s.model,
    profile: s.profile,
    engine: "default",
    gpuIndices: [...s.gpuIndices],
    gpuUuids: s.gpuIndices.map(() => ""),
    engineArgs: [],
    engineEnv: {},
    rank: 0,
    worldSize: 1,
    masterAddr: "",
    masterPort: 0,
  };
}

/** The default engines of a simulated node: the real supervisor over faked processes. */
export function supervisedSimEngines(o: SimMachineContext): SimMachineEngines {
  return new SupervisedSimEngines(o);
}
