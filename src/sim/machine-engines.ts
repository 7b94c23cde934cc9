/**
 * A simulated machine's engines as a simulated node drives them: the
 * supervisor each agent process gets, and what the machine around the agent
 * needs (GPU memory they hold, a GPU that dies under them, a restart that
 * empties the machine). `llmgw sim` runs the real engine supervisor over
 * faked processes (supervised-engines.ts); the deterministic simulation
 * (`llmgw simulate`), which may use no real timer and no file, brings its
 * own.
 */
import type { AgentClock } from "../agent/client/index.js";
import type { ShardEvent, ShardSupervisor, SupervisedShard } from "../agent/node-agent.js";
import type { SimConfig } from "./config.js";
import type { NodeFaultPlan } from "./fault-plan.js";
import type { ShardLoadReading } from "./load.js";

/** A simulated engine's shard, as the fleet sees it: a supervised shard without its endpoint, with its rank. */
export interface SimShard extends Omit<SupervisedShard, "endpoint"> {
  /** Its rank in the replica (0 when unknown, e.g. preloaded). */
  rank: number;
}

/** An engine found running when the agent starts (before this simulator's run). */
export type PreloadedShard = Omit<SimShard, "state" | "rank">;

/** What the load model reads of a shard. */
export type LoadedShard = Pick<SimShard, "replicaId" | "model" | "rank">;

/** The supervisor of one agent process. */
export interface AgentSupervisor {
  supervisor: ShardSupervisor;
  /** Re-attaches the engines an earlier agent process left running; the agent starts once it resolved. */
  adopt?: () => Promise<unknown>;
  /** The agent process ends: its supervisor stops watching (the engines live on). */
  close?: () => Promise<void>;
}

export interface SimMachineEngines {
  /** The supervisor for a new agent process; its shard events go to `onEvent`. */
  supervisorFor(onEvent: (e: ShardEvent) => void): AgentSupervisor;
  /** The shards now (copies). */
  list(): SimShard[];
  /** Each engine's shard id and state (the simulation's check of shards on two nodes reads it). */
  forEachState(fn: (shardId: string, state: SimShard["state"]) => void): void;
  /** The GPUs of each engine that has loaded and holds its KV cache; the node's GPUs sum their memory. */
  forEachLoaded(fn: (gpuIndices: readonly number[]) => void): void;
  /** GPU `index` fell off the bus: its engines die with it. */
  gpuFailed(index: number, problem: string): void;
  /** Engines already running before the agent started (call before the first agent). */
  preload(shards: readonly PreloadedShard[], gpuCount: number): void;
  /** Brings the preloaded engines up, so that the first registration reports them. */
  servePreloaded(): Promise<void>;
  /** The machine restarted: its engines are gone, unsaid. */
  clear(): void;
  /** The simulator stops. */
  close(): Promise<void> | void;
}

/** What a node gives its machine's engines. */
export interface SimMachineContext {
  nodeId: string;
  /** 0-based place in the fleet. */
  position: number;
  config: SimConfig;
  faults: NodeFaultPlan;
  /** The load a running shard reports (src/sim/load.ts); undefined: none. */
  load?: (shard: LoadedShard) => ShardLoadReading | undefined;
  /** Time and timers (default: the process's; `llmgw simulate` hands in simulated ones). */
  clock?: AgentClock;
  /** A directory of the machine's own (the agent's state directory); absent when nothing may be written. */
  stateDir?: string;
}

export type SimMachineEnginesFactory = (o: SimMachineContext) => SimMachineEngines;
