/**
 * The node agent: the node's hardware and engines on one side, its stream to
 * the control plane on the other. It registers what the machine has and
 * runs (engines adopted from before a restart included), turns commands into
 * engine starts, stops and drains, reports every shard change, and samples
 * the GPUs for heartbeats.
 *
 * The parts it drives are handed in as ports (`GpuSource`, `ShardSupervisor`)
 * so the wiring stays in one place: `llmgw agent` builds the real ones.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import {
  type ControlMessage,
  type DrainShard,
  type FabricSchema,
  GpuProblem_Kind,
  type GpuProblemSchema,
  type GpuSchema,
  type StartShard,
  ShardStatus_State as State,
  type StopShard,
} from "../gen/llmgw/v1/agent_pb.js";
import {
  AgentConnection,
  type ConnectionEvent,
  type HeartbeatInit,
  type RegisterInit,
  type TlsIdentity,
} from "./client/index.js";
import type { AgentMetrics } from "./metrics.js";

export type GpuInit = MessageInitShape<typeof GpuSchema>;
export type FabricInit = MessageInitShape<typeof FabricSchema>;
export type GpuProblemInit = MessageInitShape<typeof GpuProblemSchema>;

/** What the node's GPUs are: read once at start. */
export interface NodeHardwareInventory {
  gpus: GpuInit[];
  fabrics: FabricInit[];
  /** Problems seen at discovery. */
  problems: GpuProblemInit[];
}

/** A periodic look at the GPUs: memory used by anything (ours or foreign), and problems seen. */
export interface GpuSample {
  memoryUsedMb: number[];
  problems: GpuProblemInit[];
}

export interface GpuSource {
  sample(): Promise<GpuSample>;
}

export type ShardStateName = "starting" | "running" | "draining" | "stopped" | "failed";

/** What the supervisor says of a shard. */
export interface ShardEvent {
  shardId: string;
  replicaId: string;
  state: ShardStateName;
  endpoint?: string;
  exitCode?: number;
  error?: string;
  lastOutput?: string;
}

/** A shard the supervisor runs (adopted ones included). */
export interface SupervisedShard {
  shardId: string;
  replicaId: string;
  model: string;
  profile: string;
  gpuIndices: number[];
  state: ShardStateName;
  endpoint: string;
}

export interface ShardStartSpec {
  shardId: string;
  replicaId: string;
  model: string;
  profile: string;
  engine: string;
  gpuIndices: number[];
  engineArgs: string[];
  engineEnv: Record<string, string>;
  rank: number;
  worldSize: number;
  masterAddr: string;
  masterPort: number;
}

/**
 * A command's answer. `shardFailed`: the shard will never run as asked (a
 * start its engine's policy refuses), so it is also reported FAILED with
 * the error, for operators to see on the shard itself.
 */
export type CommandOutcome = { ok: true } | { ok: false; error: string; shardFailed?: boolean };

export interface ShardSupervisor {
  start(spec: ShardStartSpec): Promise<CommandOutcome>;
  stop(shardId: string): Promise<CommandOutcome>;
  drain(shardId: string, deadlineUnixMs: number): Promise<CommandOutcome>;
  shards(): SupervisedShard[];
  /** How busy each RUNNING shard's engine last said it was; a shard whose engine could not be read is left out. */
  loads(): Array<{ shardId: string; queueDepth: number; kvCacheUse: number }>;
}

export interface NodeAgentLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface NodeAgentOptions {
  nodeId: string;
  /** Where other nodes and the data plane reach this node ("" when not known). */
  advertiseAddress: string;
  agentVersion: string;
  labels: Record<string, string>;
  gateways: readonly string[];
  tls: () => TlsIdentity | undefined;
  heartbeatMs: number;
  ackTimeoutMs: number;
  reconnectMinMs: number;
  reconnectMaxMs: number;
  random: () => number;
  hardware: NodeHardwareInventory;
  gpus: GpuSource;
  supervisor: ShardSupervisor;
  metrics: AgentMetrics;
  logger: NodeAgentLogger;
}

const STATE: Record<ShardStateName, State> = {
  starting: State.STARTING,
  running: State.RUNNING,
  draining: State.DRAINING,
  stopped: State.STOPPED,
  failed: State.FAILED,
};

/** The protocol's name of a problem kind, for metrics. */
function kindName(kind: GpuProblem_Kind | undefined): string {
  return (GpuProblem_Kind[kind ?? GpuProblem_Kind.UNSPECIFIED] ?? "UNSPECIFIED").toLowerCase();
}

export class NodeAgent {
  readonly #o: NodeAgentOptions;
  readonly #connection: AgentConnection;
  /** Memory in use per GPU, last sampled. */
  #memoryUsedMb: number[];
  /** Problems per GPU: registered with every registration (the hardware stays broken). */
  readonly #problems: string[][];
  /** Problems not yet said in a heartbeat. */
  #pendingProblems: GpuProblemInit[] = [];
  readonly #seenProblems = new Set<string>();
  #sampleTimer: NodeJS.Timeout | undefined;
  #sampling: Promise<void> | undefined;
  #stopped = false;

  constructor(opts: NodeAgentOptions) {
    this.#o = opts;
    this.#memoryUsedMb = opts.hardware.gpus.map((g) => Number(g.memoryUsedMb ?? 0));
    this.#problems = opts.hardware.gpus.map((g) => [...(g.problems ?? [])]);
    for (const p of opts.hardware.problems) this.#noteProblem(p, false);
    this.#connection = new AgentConnection({
      gateways: opts.gateways,
      protocol: "connect",
      tls: opts.tls,
      ackTimeoutMs: opts.ackTimeoutMs,
      heartbeatMs: opts.heartbeatMs,
      reconnectMinMs: opts.reconnectMinMs,
      reconnectMaxMs: opts.reconnectMaxMs,
      random: opts.random,
      registration: () => this.#registration(),
      heartbeat: () => this.#heartbeat(),
      onControl: (m) => this.#onControl(m),
      onEvent: (e) => this.#onConnectionEvent(e),
      resendUnacked: true,
    });
  }

  get connected(): boolean {
    return this.#connection.connected;
  }

  /** The registration last sent (for tests and the smoke script). */
  get lastRegistration() {
    return this.#connection.lastRegistration;
  }

  /** Connects and keeps connected until stop(); samples the GPUs every heartbeat. */
  start(): void {
    this.#sampleTimer = setInterval(() => {
      this.#sampling ??= this.#sample().finally(() => {
        this.#sampling = undefined;
      });
    }, this.#o.heartbeatMs);
    this.#connection.start();
  }

  /** Closes the stream. Engines keep running: they outlive the agent. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#sampleTimer);
    await this.#sampling;
    await this.#connection.stop();
  }

  /** The supervisor's word on a shard: said to the control plane (again after a reconnect, until acknowledged). */
  onShardEvent(e: ShardEvent): void {
    if (e.state === "stopped" || e.state === "failed") this.#o.metrics.engineExits.inc({ outcome: e.state });
    this.#updateEngineGauge();
    this.#connection.send({
      msg: {
        case: "shard",
        value: {
          replicaId: e.replicaId,
          shardId: e.shardId,
          state: STATE[e.state],
          error: e.error ?? "",
          exitCode: e.exitCode ?? 0,
          lastOutput: e.lastOutput ?? "",
          endpoint: e.state === "running" ? (e.endpoint ?? "") : "",
        },
      },
    });
    this.#o.metrics.unacknowledged.set(this.#connection.unacknowledged);
  }

  #updateEngineGauge(): void {
    const counts: Record<ShardStateName, number> = {
      starting: 0,
      running: 0,
      draining: 0,
      stopped: 0,
      failed: 0,
    };
    for (const s of this.#o.supervisor.shards()) counts[s.state]++;
    for (const [state, n] of Object.entries(counts)) this.#o.metrics.engines.set({ state }, n);
  }

  // --- the stream ------------------------------------------------------------

  #registration(): RegisterInit {
    const o = this.#o;
    return {
      nodeId: o.nodeId,
      agentVersion: o.agentVersion,
      advertiseAddress: o.advertiseAddress,
      gpus: o.hardware.gpus.map((g, i) => ({
        ...g,
        memoryUsedMb: BigInt(this.#memoryUsedMb[i] ?? 0),
        problems: [...(this.#problems[i] ?? [])],
      })),
      fabrics: o.hardware.fabrics,
      // What runs now, adopted engines included; an empty list is information.
      runningShards: o.supervisor
        .shards()
        .filter((s) => s.state === "starting" || s.state === "running" || s.state === "draining")
        .map((s) => ({
          shardId: s.shardId,
          replicaId: s.replicaId,
          model: s.model,
          profile: s.profile,
          gpuIndices: [...s.gpuIndices],
          state: STATE[s.state],
          endpoint: s.state === "running" ? s.endpoint : "",
        })),
      labels: o.labels,
    };
  }

  #heartbeat(): HeartbeatInit {
    const problems = this.#pendingProblems;
    this.#pendingProblems = [];
    return {
      gpuMemoryUsedMb: this.#memoryUsedMb.map((mb) => BigInt(mb)),
      gpuProblems: problems,
      shardLoad: this.#o.supervisor.loads(),
    };
  }

  #onConnectionEvent(e: ConnectionEvent): void {
    const { logger: log, metrics: m } = this.#o;
    switch (e.type) {
      case "connecting":
        log.info({ url: e.url, reconnect: e.reconnect }, "connecting to gateway");
        return;
      case "registered":
        m.connected.set(1);
        m.registrations.inc();
        log.info({ url: e.url, sessionId: e.sessionId }, "registered");
        return;
      case "acked":
        m.unacknowledged.set(this.#connection.unacknowledged);
        return;
      case "disconnected":
        m.connected.set(0);
        m.disconnects.inc({ cause: e.retryAfterMs === undefined ? "ended" : "reconnect" });
        if (!this.#stopped)
          log.warn({ url: e.url, reason: e.reason, nextAttemptMs: e.nextAttemptMs }, "stream ended");
        return;
      case "resent":
        m.resent.inc(e.count);
        log.info({ count: e.count }, "said again what was not acknowledged");
        return;
      default: {
        const never: never = e;
        throw new Error(`unhandled connection event ${JSON.stringify(never)}`);
      }
    }
  }

  // --- commands --------------------------------------------------------------

  #onControl(m: ControlMessage): void {
    switch (m.msg.case) {
      case "start":
        void this.#answer(
          "start",
          m.msg.value.commandId,
          m.msg.value.shardId,
          this.#start(m.msg.value),
          m.msg.value.replicaId,
        );
        return;
      case "stop":
        void this.#answer("stop", m.msg.value.commandId, m.msg.value.shardId, this.#stop(m.msg.value));
        return;
      case "drain":
        void this.#answer("drain", m.msg.value.commandId, m.msg.value.shardId, this.#drain(m.msg.value));
        return;
      case "ack":
      case "reconnect":
      case undefined:
        return;
      default: {
        const never: never = m.msg;
        throw new Error(`unhandled control message ${JSON.stringify(never)}`);
      }
    }
  }

  async #answer(
    command: "start" | "stop" | "drain",
    commandId: string,
    shardId: string,
    outcome: Promise<CommandOutcome>,
    replicaId?: string,
  ): Promise<void> {
    let r: CommandOutcome;
    try {
      r = await outcome;
    } catch (err) {
      // A supervisor that threw still gets the command answered: never a command left hanging.
      r = { ok: false, error: err instanceof Error ? err.message : String(err) };
    }
    this.#o.metrics.commands.inc({ command, outcome: r.ok ? "ok" : "refused" });
    if (!r.ok) this.#o.logger.warn({ command, commandId, shardId, error: r.error }, "command refused");
    else this.#o.logger.info({ command, commandId, shardId }, "command accepted");
    this.#connection.send({
      msg: { case: "result", value: { commandId, ok: r.ok, error: r.ok ? "" : r.error } },
    });
    // After the result, so the replica's failure reads as a refused start.
    if (!r.ok && r.shardFailed && command === "start" && replicaId !== undefined)
      this.onShardEvent({ shardId, replicaId, state: "failed", error: r.error });
  }

  #start(cmd: StartShard): Promise<CommandOutcome> {
    const n = this.#o.hardware.gpus.length;
    if (cmd.gpuIndices.length === 0) return Promise.resolve({ ok: false, error: "no GPU indices given" });
    const bad = cmd.gpuIndices.find((i) => i >= n);
    if (bad !== undefined)
      return Promise.resolve({ ok: false, error: `GPU index ${bad} does not exist (the node has ${n})` });
    return this.#o.supervisor.start({
      shardId: cmd.shardId,
      replicaId: cmd.replicaId,
      model: cmd.model,
      profile: cmd.profile,
      engine: cmd.engine === "" ? "default" : cmd.engine,
      gpuIndices: [...cmd.gpuIndices],
      engineArgs: [...cmd.engineArgs],
      engineEnv: { ...cmd.engineEnv },
      rank: cmd.rank,
      worldSize: Math.max(1, cmd.worldSize),
      masterAddr: cmd.masterAddr,
      masterPort: cmd.masterPort,
    });
  }

  #stop(cmd: StopShard): Promise<CommandOutcome> {
    return this.#o.supervisor.stop(cmd.shardId);
  }

  #drain(cmd: DrainShard): Promise<CommandOutcome> {
    return this.#o.supervisor.drain(cmd.shardId, Number(cmd.deadlineUnixMs));
  }

  // --- GPUs ------------------------------------------------------------------

  async #sample(): Promise<void> {
    try {
      const s = await this.#o.gpus.sample();
      this.#memoryUsedMb = this.#o.hardware.gpus.map(
        (_, i) => s.memoryUsedMb[i] ?? this.#memoryUsedMb[i] ?? 0,
      );
      this.#memoryUsedMb.forEach((mb, i) => {
        this.#o.metrics.gpuMemoryUsed.set({ gpu: String(i) }, mb);
      });
      for (const p of s.problems) this.#noteProblem(p, true);
    } catch (err) {
      // The last good sample stands; a driver that stopped answering is for operators to see.
      this.#o.metrics.gpuSampleFailures.inc();
      this.#o.logger.error({ err: err instanceof Error ? err.message : String(err) }, "GPU sample failed");
    }
  }

  /** A problem is reported once: an agent repeating it would say nothing new. */
  #noteProblem(p: GpuProblemInit, forHeartbeat: boolean): void {
    const index = p.gpuIndex ?? 0;
    const message = p.message ?? "";
    const key = `${index}\u0000${message}`;
    if (this.#seenProblems.has(key)) return;
    this.#seenProblems.add(key);
    const list = this.#problems[index];
    if (list && !list.includes(message)) list.push(message);
    this.#o.metrics.gpuProblems.inc({ kind: kindName(p.kind) });
    this.#o.logger.warn({ gpu: index, kind: kindName(p.kind), problem: message }, "GPU problem");
    if (forHeartbeat) this.#pendingProblems.push(p);
  }
}
