/**
 * Named faults a simulated node can suffer. Shard faults change what happens
 * to a started shard; node faults change what the node itself reports.
 */

export const SHARD_FAULTS = [
  "fail",
  "crash-loop",
  "hang",
  "refuse-start",
  "never-starting",
  "exit-after-running",
  "slow-start",
] as const;
export const NODE_FAULTS = ["leak", "partition", "xid"] as const;
export const FAULT_NAMES = [...SHARD_FAULTS, ...NODE_FAULTS] as const;

export type ShardFault = (typeof SHARD_FAULTS)[number];
export type NodeFault = (typeof NODE_FAULTS)[number];
export type FaultName = (typeof FAULT_NAMES)[number];

/** Other names operators reach for first. */
const ALIASES: Record<string, FaultName> = {
  oom: "fail",
  crashloop: "crash-loop",
  "crash-after-running": "crash-loop",
  "stuck-starting": "hang",
};

/**
 * One `--fault` entry: a fault for every node (subject to the fault rate),
 * for one node (`name@node-id`), or, for a shard fault, for every start
 * whose engine arguments include a given one (`name@arg=--flag`: a spec
 * that crashes wherever it runs, as a bad rollout does).
 */
export interface FaultSpec {
  name: FaultName;
  node?: string;
  engineArg?: string;
}

const ARG_PREFIX = "arg=";

/** Parses `name`, `name@node-id` or `name@arg=ARG`; undefined when the name is not a known fault. */
export function parseFaultSpec(text: string): FaultSpec | undefined {
  const at = text.indexOf("@");
  const rawName = (at < 0 ? text : text.slice(0, at)).trim();
  const name = ALIASES[rawName] ?? (FAULT_NAMES as readonly string[]).find((n) => n === rawName);
  if (!name) return undefined;
  if (at < 0) return { name: name as FaultName };
  const target = text.slice(at + 1).trim();
  if (target.startsWith(ARG_PREFIX)) {
    const engineArg = target.slice(ARG_PREFIX.length);
    return engineArg && isShardFault(name as FaultName) ? { name: name as FaultName, engineArg } : undefined;
  }
  return target ? { name: name as FaultName, node: target } : undefined;
}

export function isShardFault(name: FaultName): name is ShardFault {
  return (SHARD_FAULTS as readonly string[]).includes(name);
}

/** What the engine prints when CUDA runs out of memory at start-up (another process holds the card). */
export function oomError(
  gpuIndex: number,
  totalMb: number,
  kvFraction: number,
): { error: string; output: string } {
  const totalGiB = (totalMb / 1024).toFixed(2);
  const error =
    `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU ${gpuIndex} has a total ` +
    `capacity of ${totalGiB} GiB of which 1.21 GiB is free. Process 41377 has ${(Number(totalGiB) - 1.21).toFixed(2)} ` +
    `GiB memory in use.`;
  const output = [
    "INFO Loading model weights took 14.9 GiB",
    `INFO gpu_memory_utilization=${kvFraction}`,
    "ERROR Engine core initialization failed.",
    error,
  ].join("\n");
  return { error, output };
}

/**
 * How much longer than `startDelayMs` a `slow-start` engine loads: weights
 * pulled from a cold cache or a slow disk. Still inside a ready timeout set
 * for the engine's usual load time, so the start is late, not lost.
 */
export const SLOW_START_FACTOR = 6;

/** Why an agent refuses a start (`refuse-start`): the engine cannot even be launched. */
export const REFUSE_START_ERROR =
  "cannot launch engine: image vllm/vllm-openai:v0.0.0-missing not found on this node";

/** What an engine that exits cleanly on its own (`exit-after-running`) prints last. */
export const UNASKED_EXIT_OUTPUT =
  "INFO Shutting down: received SIGTERM from outside the agent\nINFO Engine exited";

/** What a crash-looping engine leaves behind. */
export const CRASH_ERROR = "engine exited unexpectedly: RuntimeError: NCCL error: unhandled system error";
export const CRASH_EXIT_CODE = 134;

/** The Xid a failing GPU reports; the GPU must leave service. */
export function xidProblem(gpuIndex: number, uuid: string): string {
  return `Xid 79: GPU has fallen off the bus (GPU ${gpuIndex}, ${uuid})`;
}

/** How a launched engine ends on its own: exit code, what it says, and when. */
export interface EngineExitCourse {
  /** From the launch (an engine that never got ready), or from its readiness. */
  afterMs: number;
  exitCode: number;
  /** The error the engine's exit is reported with. */
  error: string;
  /** The last lines it printed. */
  output: string;
}

/**
 * What an engine does under its shard fault, in time: the one description
 * both simulated machines follow, the simulator's engine host under the
 * real supervisor (engine-host.ts) and the simulation's engines
 * (src/simulation/engines.ts). `refused`: the launch fails at once;
 * `never-returns`: the launch hangs (an image pull, a fork), so the start
 * is never answered; `launched`: a process that becomes ready after
 * `readyAfterMs` (undefined: never, stuck loading) and may exit on its own.
 */
export type EngineCourse =
  | { launch: "refused"; error: string }
  | { launch: "never-returns" }
  | { launch: "launched"; readyAfterMs: number | undefined; exit: EngineExitCourse | undefined };

/** The timings and the GPU a course needs (of SimConfig). */
export interface EngineCourseConfig {
  startDelayMs: number;
  failAfterMs: number;
  crashAfterMs: number;
  gpuMemoryMb: number;
  kvCacheFraction: number;
}

/** The course of an engine launched with `fault` (undefined: none) on `gpuIndex` (its first GPU). */
export function engineCourse(
  fault: ShardFault | undefined,
  c: EngineCourseConfig,
  gpuIndex: number,
): EngineCourse {
  switch (fault) {
    case "refuse-start":
      return { launch: "refused", error: REFUSE_START_ERROR };
    case "never-starting":
      return { launch: "never-returns" };
    case "hang":
      return { launch: "launched", readyAfterMs: undefined, exit: undefined };
    case "fail": {
      const { error, output } = oomError(gpuIndex, c.gpuMemoryMb, c.kvCacheFraction);
      return {
        launch: "launched",
        readyAfterMs: undefined,
        exit: { afterMs: Math.min(c.failAfterMs, c.startDelayMs), exitCode: 1, error, output },
      };
    }
    case "crash-loop":
      return {
        launch: "launched",
        readyAfterMs: c.startDelayMs,
        exit: {
          afterMs: c.crashAfterMs,
          exitCode: CRASH_EXIT_CODE,
          error: CRASH_ERROR,
          output: `${CRASH_ERROR}\nAborted (core dumped)`,
        },
      };
    case "exit-after-running":
      return {
        launch: "launched",
        readyAfterMs: c.startDelayMs,
        exit: { afterMs: c.crashAfterMs, exitCode: 0, error: "", output: UNASKED_EXIT_OUTPUT },
      };
    case "slow-start":
      return { launch: "launched", readyAfterMs: c.startDelayMs * SLOW_START_FACTOR, exit: undefined };
    case undefined:
      return { launch: "launched", readyAfterMs: c.startDelayMs, exit: undefined };
    default: {
      const never: never = fault;
      throw new Error(`unhandled fault ${String(never)}`);
    }
  }
}
