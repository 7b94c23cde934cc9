/**
 * Which faults hit which node and which start. Targeted faults (`name@node`)
 * always apply to their node, and faults targeted at an engine argument
 * (`name@arg=ARG`) to every start that carries it; untargeted ones form a
 * pool drawn with the fault rate: per start for shard faults, once per node
 * for node faults.
 */
import type { SimConfig } from "./config.js";
import { isShardFault, type NodeFault, SHARD_FAULTS, type ShardFault } from "./faults.js";
import type { Rng } from "./rng.js";

export interface NodeFaultPlan {
  /** Faults of the node itself, fixed for the node's life. */
  readonly nodeFaults: ReadonlySet<NodeFault>;
  /** The fault, if any, of the next start on this node (with these engine arguments). */
  shardFault(engineArgs?: readonly string[]): ShardFault | undefined;
}

export function planFaults(config: SimConfig, nodeId: string, rng: Rng): NodeFaultPlan {
  const mine = config.faults.filter((f) => f.node === nodeId).map((f) => f.name);
  const byArg = config.faults.filter((f) => f.engineArg !== undefined);
  const pool = config.faults
    .filter((f) => f.node === undefined && f.engineArg === undefined)
    .map((f) => f.name);
  const targetedShard = mine.filter(isShardFault);
  const poolShard = pool.filter(isShardFault);
  // A bare --fault-rate with no named fault draws among every shard fault.
  const drawShard: readonly ShardFault[] = poolShard.length > 0 || pool.length > 0 ? poolShard : SHARD_FAULTS;

  const nodeFaults = new Set<NodeFault>(mine.filter((n): n is NodeFault => !isShardFault(n)));
  for (const name of pool) {
    if (!isShardFault(name) && rng() < config.faultRate) nodeFaults.add(name);
  }
  const pick = <T>(from: readonly T[]): T | undefined => from[Math.floor(rng() * from.length)];
  return {
    nodeFaults,
    shardFault(engineArgs = []) {
      const argFault = byArg.find((f) => engineArgs.includes(f.engineArg as string));
      if (argFault && isShardFault(argFault.name)) return argFault.name;
      if (targetedShard.length > 0) return pick(targetedShard);
      if (drawShard.length > 0 && config.faultRate > 0 && rng() < config.faultRate) return pick(drawShard);
      return undefined;
    },
  };
}
