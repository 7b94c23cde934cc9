import type { CommandResult, Heartbeat, Register, ShardStatus } from "../../gen/llmgw/v1/agent_pb.js";
import { invalidHostAddressReason } from "../../ids/host-address.js";
import { isReservedKey } from "../../ids/reserved-keys.js";

/**
 * What an agent may claim about itself. The wire format bounds a message's
 * size, not its shape. A registration that names one thing twice (a GPU
 * index, a shard id, a GPU within one list of indices) contradicts itself:
 * commands address GPUs by index and shards by id, and the gateway cannot
 * tell which of the two is meant, so it is refused as a whole
 * (InvalidArgument naming the field) rather than repaired by a guess that
 * would become the fleet's truth in the log.
 *
 * A running shard or a fabric on a GPU the node does not list is not a
 * contradiction but a fact: it is what an agent reports when a GPU fell off
 * the bus under a running engine. Refusing it would disconnect the node at
 * the moment it needs care, so it is recorded as sent; the reconciler never
 * adopts such a shard (it is stopped as unclaimed) and placement uses only
 * the GPUs the node lists.
 *
 * The bounds are far above any real machine and keep one agent from making
 * every fold and placement pass iterate over junk.
 */
export const LIMITS = {
  gpus: 256,
  fabrics: 64,
  runningShards: 1024,
  labels: 256,
  /** Problems listed per GPU in a registration, and per heartbeat. */
  problems: 256,
  /** A shard's endpoint URL. */
  endpointChars: 2048,
} as const;

/** The first thing wrong with a registration (field named as in the proto), or undefined. */
/** A UUID is 36; room for other spellings, none for a payload. */
const INSTANCE_ID_MAX = 64;

export function registrationProblem(reg: Register): string | undefined {
  const tooMany = (field: string, n: number, max: number) =>
    n > max ? `${field} lists ${n} entries; at most ${max} are allowed` : undefined;
  const count =
    tooMany("gpus", reg.gpus.length, LIMITS.gpus) ??
    tooMany("fabrics", reg.fabrics.length, LIMITS.fabrics) ??
    tooMany("running_shards", reg.runningShards.length, LIMITS.runningShards) ??
    tooMany("labels", Object.keys(reg.labels).length, LIMITS.labels);
  if (count) return count;
  // Other nodes' engines are pointed at it (StartShard.master_addr).
  const address = invalidHostAddressReason(reg.advertiseAddress, "advertise_address");
  if (address) return address;
  if (reg.instanceId.length > INSTANCE_ID_MAX) {
    return `instance_id is ${reg.instanceId.length} characters long; at most ${INSTANCE_ID_MAX} are allowed`;
  }

  const gpus = new Map<number, number>();
  for (const [i, g] of reg.gpus.entries()) {
    const first = gpus.get(g.index);
    if (first !== undefined) {
      return `gpus[${i}].index: GPU index ${g.index} is listed twice (also gpus[${first}])`;
    }
    gpus.set(g.index, i);
    const p = problemsProblem(`gpus[${i}].problems`, g.problems);
    if (p) return p;
  }
  const indexList = (field: string, indices: readonly number[]): string | undefined => {
    if (indices.length > LIMITS.gpus) {
      return `${field} lists ${indices.length} GPUs; at most ${LIMITS.gpus} are allowed`;
    }
    const seen = new Set<number>();
    for (const [j, x] of indices.entries()) {
      if (seen.has(x)) return `${field}[${j}]: GPU ${x} is listed twice`;
      seen.add(x);
    }
    return undefined;
  };
  for (const [i, f] of reg.fabrics.entries()) {
    const p = indexList(`fabrics[${i}].gpu_indices`, f.gpuIndices);
    if (p) return p;
  }
  const shards = new Map<string, number>();
  for (const [i, s] of reg.runningShards.entries()) {
    if (s.shardId === "") return `running_shards[${i}].shard_id is empty`;
    const reserved =
      reservedProblem(`running_shards[${i}].shard_id`, s.shardId) ??
      reservedProblem(`running_shards[${i}].replica_id`, s.replicaId);
    if (reserved) return reserved;
    const first = shards.get(s.shardId);
    if (first !== undefined) {
      return `running_shards[${i}].shard_id: shard ${JSON.stringify(s.shardId)} is listed twice (also running_shards[${first}])`;
    }
    shards.set(s.shardId, i);
    const p =
      indexList(`running_shards[${i}].gpu_indices`, s.gpuIndices) ??
      endpointProblem(`running_shards[${i}].endpoint`, s.endpoint);
    if (p) return p;
  }
  return undefined;
}

/** The first thing wrong with a shard status, or undefined. */
export function shardStatusProblem(st: ShardStatus): string | undefined {
  return (
    reservedProblem("shard.replica_id", st.replicaId) ??
    reservedProblem("shard.shard_id", st.shardId) ??
    endpointProblem("shard.endpoint", st.endpoint)
  );
}

/**
 * An endpoint goes to routers as it is (the routing table, the endpoints
 * bucket): it is an http or https URL of bounded length, or empty (not known).
 */
function endpointProblem(field: string, value: string): string | undefined {
  if (value === "") return undefined;
  if (value.length > LIMITS.endpointChars) {
    return `${field} is ${value.length} characters long; at most ${LIMITS.endpointChars} are allowed`;
  }
  const url = URL.parse(value);
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) {
    return `${field} ${JSON.stringify(value.slice(0, 80))} is not an http:// or https:// URL`;
  }
  return undefined;
}

/** The first thing wrong with a command result, or undefined. */
export function commandResultProblem(r: CommandResult): string | undefined {
  return reservedProblem("result.command_id", r.commandId);
}

/**
 * Ids the agent names become keys of the projected state's maps, where
 * `constructor` or `__proto__` would reach an object's prototype: refused.
 */
function reservedProblem(field: string, value: string): string | undefined {
  return value !== "" && isReservedKey(value)
    ? `${field} ${JSON.stringify(value)} is a reserved name`
    : undefined;
}

/** The first thing wrong with a heartbeat, or undefined. */
export function heartbeatProblem(hb: Heartbeat): string | undefined {
  if (hb.gpuMemoryUsedMb.length > LIMITS.gpus) {
    return `heartbeat.gpu_memory_used_mb lists ${hb.gpuMemoryUsedMb.length} GPUs; at most ${LIMITS.gpus} are allowed`;
  }
  const node = problemsProblem("heartbeat.new_problems", hb.newProblems);
  if (node) return node;
  return problemsProblem("heartbeat.gpu_problems", hb.gpuProblems) ?? shardLoadProblem(hb.shardLoad);
}

/** At most one entry per shard, as many as a registration may run, each a valid id and a share in [0, 1]. */
function shardLoadProblem(load: Heartbeat["shardLoad"]): string | undefined {
  if (load.length > LIMITS.runningShards) {
    return `heartbeat.shard_load lists ${load.length} shards; at most ${LIMITS.runningShards} are allowed`;
  }
  const seen = new Map<string, number>();
  for (const [i, l] of load.entries()) {
    const at = `heartbeat.shard_load[${i}]`;
    if (l.shardId === "") return `${at}.shard_id is empty`;
    const reserved = reservedProblem(`${at}.shard_id`, l.shardId);
    if (reserved) return reserved;
    const first = seen.get(l.shardId);
    if (first !== undefined)
      return `${at}.shard_id: shard ${JSON.stringify(l.shardId)} is listed twice (also heartbeat.shard_load[${first}])`;
    seen.set(l.shardId, i);
    if (!(l.kvCacheUse >= 0 && l.kvCacheUse <= 1))
      return `${at}.kv_cache_use is ${l.kvCacheUse}; it must be a share from 0 to 1`;
  }
  return undefined;
}

/** At most LIMITS.problems of them; a long problem text is not refused (the session core cuts it, text-caps.ts). */
function problemsProblem(field: string, problems: readonly unknown[]): string | undefined {
  if (problems.length > LIMITS.problems) {
    return `${field} lists ${problems.length} problems; at most ${LIMITS.problems} are allowed`;
  }
  return undefined;
}
