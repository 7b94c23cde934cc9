import type { GpuProblem, Register, ShardLoad } from "../../gen/llmgw/v1/agent_pb.js";

/**
 * When a shard's load is worth a usage event (documented in
 * docs/gateway.md): its queue depth moved by at least 2 requests and 10% of
 * the recorded depth, or its KV-cache use by at least 0.05, or the set of
 * shards reporting load changed. Smaller moves are noise to an autoscaler
 * whose tolerance band is wider; they never reach the log.
 */
export const LOAD_THRESHOLDS = Object.freeze({ queueDepth: 2, queueDepthShare: 0.1, kvCacheUse: 0.05 });

/**
 * Problems remembered per session. The gateway's memory of them stays
 * bounded whatever an agent reports: past this the oldest are forgotten
 * (a segment at a time, see `ProblemMemory`), and one reported again is
 * recorded again (conservative).
 */
export const REMEMBERED_PROBLEMS = 4096;

/**
 * Problems are remembered in segments of this many, oldest first. A step
 * that remembers new problems copies only the newest segment, so a
 * heartbeat's new problem costs a copy of at most this many keys, never of
 * the whole memory, and the state before the step is left as it was.
 */
const SEGMENT = 256;

/** The problems already reported on a session: frozen segments, oldest first. */
export interface ProblemMemory {
  readonly segments: readonly ReadonlySet<string>[];
  readonly size: number;
}

/** A shard's load as the log last has it. */
interface RecordedLoad {
  readonly queueDepth: number;
  readonly kvCacheUse: number;
}

/**
 * What the log last has of one session's usage: the memory figures of the
 * last recorded usage (the registration's, then the last usage event's), the
 * GPUs the node listed, the problems already reported and the shard load. A
 * heartbeat is worth a usage event when a GPU's memory use moved by more than
 * the threshold since the recorded figures, the number of GPUs reported
 * changed, a problem (node-level or of one GPU) not yet reported on this
 * session appears, or a shard's load moved past `LOAD_THRESHOLDS`. An agent
 * repeating a problem on every heartbeat does not grow the log. When the
 * event is written is the session core's (`usage-window.ts`).
 *
 * A value: every change makes a new baseline sharing what did not change,
 * so `step` never alters the state it is given.
 */
export interface UsageBaseline {
  readonly thresholdMb: number;
  readonly recorded: readonly bigint[];
  readonly gpus: ReadonlySet<number>;
  readonly problems: ProblemMemory;
  readonly load: ReadonlyMap<string, RecordedLoad>;
}

const NO_PROBLEMS: ProblemMemory = Object.freeze({ segments: Object.freeze([]), size: 0 });
const NO_LOAD: ReadonlyMap<string, RecordedLoad> = new Map();

/** The baseline of a session that opened with `registration`. */
export function usageBaseline(thresholdMb: number, registration: Register): UsageBaseline {
  return reregistered(
    { thresholdMb, recorded: [], gpus: new Set(), problems: NO_PROBLEMS, load: NO_LOAD },
    registration,
  );
}

/** A re-registration resets the memory figures and GPUs to what the agent now reports; its problems are known. */
export function reregistered(b: UsageBaseline, registration: Register): UsageBaseline {
  const problems: string[] = [];
  for (const g of registration.gpus) for (const p of g.problems) problems.push(p);
  return {
    ...b,
    recorded: registration.gpus.map((g) => g.memoryUsedMb),
    gpus: new Set(registration.gpus.map((g) => g.index)),
    problems: remember(
      b.problems,
      problems.filter((p) => !knows(b, p)),
    ),
  };
}

/** The registration lists GPU `index` (a problem of another GPU is dropped). */
export function lists(b: UsageBaseline, index: number): boolean {
  return b.gpus.has(index);
}

/** Problem key `key` (`nodeProblemKey`, `gpuProblemKey`) was already reported on this session. */
export function knows(b: UsageBaseline, key: string): boolean {
  const s = b.problems.segments;
  for (let i = s.length - 1; i >= 0; i--) if (s[i]!.has(key)) return true;
  return false;
}

export function nodeProblemKey(p: string): string {
  return p;
}

/** One key per distinct GPU problem; the NUL keeps it apart from any node-level problem text. */
export function gpuProblemKey(p: GpuProblem): string {
  return `\u0000gpu ${p.gpuIndex} ${p.kind}\u0000${p.message}`;
}

/** `keys` are reported (written, or waiting to be): they are not new again. */
export function remembered(b: UsageBaseline, keys: readonly string[]): UsageBaseline {
  return keys.length === 0 ? b : { ...b, problems: remember(b.problems, keys) };
}

function remember(memory: ProblemMemory, keys: readonly string[]): ProblemMemory {
  if (keys.length === 0) return memory;
  const segments = memory.segments.slice();
  const last = segments[segments.length - 1];
  // Only the newest segment is copied, and only while it has room.
  const reopen = last !== undefined && last.size < SEGMENT;
  if (reopen) segments.pop();
  let open = new Set(reopen ? last : undefined);
  let size = memory.size - open.size;
  for (const k of keys) {
    if (open.has(k)) continue;
    if (open.size >= SEGMENT) {
      segments.push(open);
      size += open.size;
      open = new Set();
    }
    open.add(k);
  }
  segments.push(open);
  size += open.size;
  while (size > REMEMBERED_PROBLEMS) size -= segments.shift()?.size ?? size;
  return { segments, size };
}

/** Memory figures `used` differ from the recorded ones by more than the threshold (or in GPU count). */
export function memoryMoved(b: UsageBaseline, used: readonly bigint[]): boolean {
  if (used.length === 0) return false;
  if (used.length !== b.recorded.length) return true;
  const threshold = BigInt(b.thresholdMb);
  for (let i = 0; i < used.length; i++) {
    const now = used[i] ?? 0n;
    const before = b.recorded[i] ?? 0n;
    const delta = now > before ? now - before : before - now;
    if (delta > threshold) return true;
  }
  return false;
}

/** Shard load `load` differs from the recorded load past the thresholds (or in its shards). */
export function loadMoved(b: UsageBaseline, load: readonly ShardLoad[]): boolean {
  if (load.length === 0) return false;
  if (load.length !== b.load.size) return true;
  for (const l of load) {
    const before = b.load.get(l.shardId);
    if (!before) return true;
    const dq = Math.abs(l.queueDepth - before.queueDepth);
    if (dq >= LOAD_THRESHOLDS.queueDepth && dq >= LOAD_THRESHOLDS.queueDepthShare * before.queueDepth)
      return true;
    if (Math.abs(l.kvCacheUse - before.kvCacheUse) >= LOAD_THRESHOLDS.kvCacheUse) return true;
  }
  return false;
}

/** A usage event with `used` (and `load`, when it carries load) is written: the baseline moves to it. */
export function recorded(
  b: UsageBaseline,
  used: readonly bigint[],
  load: readonly ShardLoad[],
): UsageBaseline {
  if (used.length === 0 && load.length === 0) return b;
  return {
    ...b,
    recorded: used.length > 0 ? [...used] : b.recorded,
    load:
      load.length > 0
        ? new Map(load.map((l) => [l.shardId, { queueDepth: l.queueDepth, kvCacheUse: l.kvCacheUse }]))
        : b.load,
  };
}
