import type { GpuProblem, Heartbeat, ShardLoad } from "../../gen/llmgw/v1/agent_pb.js";
import { LIMITS } from "./registration.js";
import {
  gpuProblemKey,
  knows,
  lists,
  loadMoved,
  memoryMoved,
  nodeProblemKey,
  recorded,
  remembered,
  type UsageBaseline,
} from "./usage.js";

/**
 * Usage events coalesced per session: at most one `UsageChanged` per usage
 * interval. A heartbeat worth an event (usage.ts's baseline decides) is written at once
 * when the session's last usage event is an interval old; otherwise what it
 * says waits, merged with the other heartbeats of the interval, and is
 * written when the interval ends (the `usage-flush` timer), with the latest
 * memory figures, the latest shard load and every new problem, if it still
 * differs from what the log has. An agent whose readings alternate, or that invents a problem in
 * every heartbeat, so writes one event per interval, however fast it sends.
 *
 * The problems one interval's event takes are bounded like a heartbeat's
 * (`LIMITS.problems` node-level, as many of single GPUs, plus the first of
 * any GPU that has none in it yet, so each GPU with a new problem is
 * reported): the event stays within what one heartbeat may say. A problem
 * past the bound is not remembered, so the agent's next report of it is
 * new again.
 */
export interface UsageWindow {
  /** When the session's last usage event was written; undefined: none yet. */
  readonly lastAt: number | undefined;
  /** The flush timer runs, due at `lastAt` + the interval. */
  readonly flushPending: boolean;
  /** What waits for the end of the interval; undefined: the log has everything. */
  readonly pending: PendingUsage | undefined;
}

/** What one usage event says. */
export interface PendingUsage {
  /** The heartbeat the event is numbered after (its own event id; that heartbeat wrote nothing else). */
  readonly seq: number;
  readonly memory: readonly bigint[];
  readonly newProblems: readonly string[];
  readonly gpuProblems: readonly GpuProblem[];
  /** The latest shard load reported in the interval (empty: none); written only when it moved. */
  readonly load: readonly ShardLoad[];
}

export const EMPTY_WINDOW: UsageWindow = { lastAt: undefined, flushPending: false, pending: undefined };

/** What one heartbeat does to the window. */
export interface HeartbeatOutcome {
  readonly window: UsageWindow;
  /** The baseline after it: its new problems remembered, and moved to what is written now. */
  readonly baseline: UsageBaseline;
  /** Written now. */
  readonly write: PendingUsage | undefined;
  /** Start the flush timer. */
  readonly schedule: boolean;
  /** The heartbeat said something new that waits for the interval's end. */
  readonly coalesced: boolean;
  /** New problems past the interval's bound, not recorded. */
  readonly droppedProblems: number;
  /** GPUs named by problems that the registration does not list. */
  readonly unknownGpus: number[];
}

/** A problem neither the baseline nor this heartbeat (`fresh`) has named yet. A function of its own, not a closure made per heartbeat. */
function isNew(baseline: UsageBaseline, fresh: ReadonlySet<string> | undefined, key: string): boolean {
  return !knows(baseline, key) && !fresh?.has(key);
}

export function observeHeartbeat(
  window: UsageWindow,
  baseline: UsageBaseline,
  intervalMs: number,
  seq: number,
  hb: Heartbeat,
  at: number,
): HeartbeatOutcome {
  const before = window.pending;
  const newProblems = [...(before?.newProblems ?? [])];
  const gpuProblems = [...(before?.gpuProblems ?? [])];
  /** Keys of the problems this heartbeat adds (remembered in one new baseline at the end). */
  let fresh: Set<string> | undefined;
  let dropped = 0;
  const unknown = new Set<number>();
  for (const p of hb.newProblems) {
    const key = nodeProblemKey(p);
    if (!isNew(baseline, fresh, key)) continue;
    if (newProblems.length >= LIMITS.problems) {
      dropped++;
      continue;
    }
    fresh = (fresh ?? new Set()).add(key);
    newProblems.push(p);
  }
  for (const p of hb.gpuProblems) {
    if (!lists(baseline, p.gpuIndex)) {
      unknown.add(p.gpuIndex);
      continue;
    }
    const key = gpuProblemKey(p);
    if (!isNew(baseline, fresh, key)) continue;
    if (gpuProblems.length >= LIMITS.problems && gpuProblems.some((q) => q.gpuIndex === p.gpuIndex)) {
      dropped++;
      continue;
    }
    fresh = (fresh ?? new Set()).add(key);
    gpuProblems.push(p);
  }
  const added = fresh?.size ?? 0;
  const known = fresh ? remembered(baseline, [...fresh]) : baseline;
  const reported = hb.gpuMemoryUsedMb.length > 0 || hb.shardLoad.length > 0;
  const memory = hb.gpuMemoryUsedMb.length > 0 ? hb.gpuMemoryUsedMb : (before?.memory ?? []);
  const load = hb.shardLoad.length > 0 ? hb.shardLoad : (before?.load ?? []);
  const outcome = { droppedProblems: dropped, unknownGpus: [...unknown] };
  if (!worthWriting({ seq, memory, newProblems, gpuProblems, load }, known)) {
    // Back to what the log has (a reading that alternated): nothing waits.
    return {
      ...outcome,
      window: { ...window, pending: undefined },
      baseline: known,
      write: undefined,
      schedule: false,
      coalesced: false,
    };
  }
  const pending: PendingUsage = {
    seq: added > 0 || reported || !before ? seq : before.seq,
    memory,
    newProblems,
    gpuProblems,
    load,
  };
  if (!window.flushPending && (window.lastAt === undefined || at - window.lastAt >= intervalMs)) {
    const settled = settle(pending, known);
    return {
      ...outcome,
      window: { lastAt: at, flushPending: false, pending: undefined },
      baseline: settled.baseline,
      write: settled.written,
      schedule: false,
      coalesced: false,
    };
  }
  return {
    ...outcome,
    window: { ...window, flushPending: true, pending },
    baseline: known,
    write: undefined,
    schedule: !window.flushPending,
    coalesced: added > 0 || reported,
  };
}

/**
 * The flush timer fired: the interval is over. What waits is written if the
 * log still lacks it, as of the timer's due time (so the events of a session
 * stay an interval apart however late the timer fires).
 */
export function flushWindow(
  window: UsageWindow,
  baseline: UsageBaseline,
  intervalMs: number,
): { window: UsageWindow; baseline: UsageBaseline; write: PendingUsage | undefined } {
  const p = window.pending;
  if (!window.flushPending || !p)
    return { window: { ...window, flushPending: false }, baseline, write: undefined };
  if (!worthWriting(p, baseline)) {
    return { window: { ...window, flushPending: false, pending: undefined }, baseline, write: undefined };
  }
  const at = (window.lastAt ?? 0) + intervalMs;
  const settled = settle(p, baseline);
  return {
    window: { lastAt: at, flushPending: false, pending: undefined },
    baseline: settled.baseline,
    write: settled.written,
  };
}

/** `p` says something the log lacks: a new problem, memory figures or shard load that moved. */
export function worthWriting(p: PendingUsage, baseline: UsageBaseline): boolean {
  return (
    p.newProblems.length > 0 ||
    p.gpuProblems.length > 0 ||
    memoryMoved(baseline, p.memory) ||
    loadMoved(baseline, p.load)
  );
}

/**
 * `p` is written: it carries its shard load only when the load moved (an
 * event written for memory or a problem does not repeat unchanged load),
 * and the baseline moves to what it carries.
 */
export function settle(
  p: PendingUsage,
  baseline: UsageBaseline,
): { written: PendingUsage; baseline: UsageBaseline } {
  const written = loadMoved(baseline, p.load) ? p : { ...p, load: [] };
  return { written, baseline: recorded(baseline, written.memory, written.load) };
}

/** How long after `now` the flush timer is due. */
export function flushDelayMs(window: UsageWindow, intervalMs: number, now: number): number {
  return Math.max(0, (window.lastAt ?? now) + intervalMs - now);
}

/**
 * A re-registration is the node's full truth: memory waiting is dropped (the
 * registration's figures are the baseline now); new problems still wait.
 */
export function afterRegistration(window: UsageWindow): UsageWindow {
  const p = window.pending;
  if (!p) return window;
  if (p.newProblems.length === 0 && p.gpuProblems.length === 0 && p.load.length === 0)
    return { ...window, pending: undefined };
  return { ...window, pending: { ...p, memory: [] } };
}
