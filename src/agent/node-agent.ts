/**
 * The node agent: the node's hardware and engines on one side, its stream to
 * the control plane on the other. It registers what the machine has and
 * runs (engines adopted from before a restart included), turns commands into
 * engine starts, stops and drains, reports every shard change, and samples
 * the GPUs for heartbeats.
 *
 * The parts it drives are handed in as ports (`GpuSource`, `ShardSupervisor`)
 * so the wiring stays in one place: `llmgw agent` builds the real ones
 * (nvidia-smi, engine processes), `llmgw sim` simulated ones (src/sim:
 * GPUs from a spec, engines faked in process), so the simulator's fleets run
 * this very agent.
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
  type AgentClock,
  type AgentConnect,
  AgentConnection,
  type ConnectionEvent,
  type HeartbeatInit,
  type RegisterInit,
  SYSTEM_CLOCK,
  type TimerHandle,
  type TlsIdentity,
} from "./client/index.js";
import type { EngineOutput } from "./engine/engine-output.js";
import { EngineLogRequests } from "./engine-log-requests.js";
import { type GpuChange, HardwareWatch, type ProblemLedgerStore } from "./hardware-watch.js";
import type { AgentMetrics } from "./metrics.js";

export type GpuInit = MessageInitShape<typeof GpuSchema>;
export type FabricInit = MessageInitShape<typeof FabricSchema>;
export type GpuProblemInit = MessageInitShape<typeof GpuProblemSchema>;

/**
 * Which occurrence of a problem a sample shows: a condition ("state": a
 * counter or 1, new when it rises) or a logged event ("event": new once).
 * The agent reports each occurrence once (hardware-watch.ts).
 */
export interface ProblemOccurrence {
  type: "state" | "event";
  signal: string;
  level: number;
}

/** A GPU problem as a GPU source sees it: `gpuIndex` is the GPU's place in its sample. */
export interface SampledProblem {
  gpuIndex: number;
  kind: GpuProblem_Kind;
  message: string;
  occurrence: ProblemOccurrence;
}

/** A GPU as a sample lists it. `slot` is where it sits (its PCI bus id): a new UUID in the same slot is a swapped GPU. */
export interface GpuSeen {
  uuid: string;
  slot: string;
  product: string;
  memoryTotalMb: number;
}

/** What the node's GPUs are at start. */
export interface NodeHardwareInventory {
  gpus: GpuInit[];
  fabrics: FabricInit[];
  /** Problems seen at discovery. */
  problems: SampledProblem[];
  /** Each GPU's slot (as in {@link GpuSeen}), in `gpus` order; absent: by index. */
  slots?: string[];
}

/** A periodic look at the GPUs: memory used by anything (ours or foreign), and problems seen. */
export interface GpuSample {
  /** Per GPU listed, in the sample's order. */
  memoryUsedMb: number[];
  problems: SampledProblem[];
  /** The GPUs listed now; absent: the source cannot tell (the registered ones stand). */
  gpus?: GpuSeen[];
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
  /**
   * The UUIDs of those GPUs, in the same order ("" where the GPU source
   * knows none): what CUDA_VISIBLE_DEVICES names, since a UUID stays with its
   * GPU when the driver numbers the GPUs differently after a GPU is lost or
   * replaced, and an index does not.
   */
  gpuUuids: string[];
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
  /** A shard's engine output for `llmgw logs` (engine-log-requests.ts); absent: none is kept. */
  output?(shardId: string): EngineOutput | undefined;
}

/**
 * What the agent did, for whoever watches it besides its logs and metrics
 * (the simulator's events and counters): each connection event, each command
 * answered, each heartbeat sent, each shard change said (`sent`: on the
 * stream now, rather than kept for the next one).
 */
export type NodeAgentActivity =
  | { type: "connection"; event: ConnectionEvent }
  | {
      type: "command";
      command: "start" | "stop" | "drain";
      commandId: string;
      shardId: string;
      outcome: CommandOutcome;
      /** A drain's deadline as received (ms since the epoch; 0: none given). */
      deadlineUnixMs?: number;
    }
  | { type: "heartbeat" }
  | { type: "shard"; event: ShardEvent; sent: boolean };

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
  /** How often the GPUs are sampled (default: every heartbeat). */
  gpuSampleMs?: number;
  /** GPU samples failing this many times in a row is a node problem (default 3). */
  gpuSampleFailureThreshold?: number;
  /** Where the problem occurrences already reported are kept (none: in memory only). */
  problemLedger?: ProblemLedgerStore;
  /** The gateway tried first (an index into `gateways`, default 0): a fleet spreads its first connections. */
  firstGateway?: number;
  /** The wire protocol (default Connect). */
  protocol?: "connect" | "grpc";
  /** Told of the agent's activity as it happens. */
  observe?: (a: NodeAgentActivity) => void;
  /** Time, timers and ids (default: the process's; `llmgw simulate` runs the agent on simulated time). */
  clock?: AgentClock;
  /** Opens a stream's connection (default: HTTP/2; `llmgw simulate` hands in its simulated transport). */
  connect?: AgentConnect;
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
  /** The GPUs now, their memory and the problem occurrences reported (hardware-watch.ts). */
  readonly #watch: HardwareWatch;
  /** Problems not yet said in a heartbeat. */
  #pendingProblems: GpuProblemInit[] = [];
  #pendingNodeProblems: string[] = [];
  #sampleTimer: TimerHandle | undefined;
  /** What the GPU memory gauge was last set to, per GPU index. */
  readonly #gaugedMemory = new Map<number, number>();
  #sampling: Promise<void> | undefined;
  #stopped = false;
  /** `llmgw logs` requests under way. */
  readonly #logRequests: EngineLogRequests;

  constructor(opts: NodeAgentOptions) {
    this.#o = opts;
    this.#watch = new HardwareWatch(opts.hardware, {
      failureThreshold: opts.gpuSampleFailureThreshold ?? 3,
      ...(opts.problemLedger ? { store: opts.problemLedger } : {}),
    });
    for (const p of this.#watch.initialProblems()) this.#noteProblem(p);
    this.#connection = new AgentConnection({
      gateways: opts.gateways,
      ...(opts.firstGateway !== undefined ? { firstGateway: opts.firstGateway } : {}),
      protocol: opts.protocol ?? "connect",
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
      ...(opts.clock ? { clock: opts.clock } : {}),
      ...(opts.connect ? { connect: opts.connect } : {}),
    });
    this.#logRequests = new EngineLogRequests({
      source: { output: (shardId) => opts.supervisor.output?.(shardId) },
      send: (chunk) => this.#connection.send({ msg: { case: "engineLog", value: chunk } }),
      queued: () => this.#connection.queued,
      onEnd: (end) => opts.metrics.engineLogRequests.inc({ end }),
    });
  }

  get connected(): boolean {
    return this.#connection.connected;
  }

  /** The registration last sent (for tests and the smoke script). */
  get lastRegistration() {
    return this.#connection.lastRegistration;
  }

  /** The gateway of the current stream. */
  get url(): string | undefined {
    return this.#connection.url;
  }

  /** Why the last stream ended, for operators. */
  get lastDisconnectReason(): string {
    return this.#connection.lastDisconnectReason;
  }

  /** Silenced (a simulated network partition). */
  get silent(): boolean {
    return this.#connection.silent;
  }

  /**
   * Hears nothing and says nothing from now on, the stream left open: a
   * network partition, as the simulator makes one. The next stream waits at
   * least `healMs`.
   */
  silence(healMs: number): void {
    this.#connection.silence(healMs);
  }

  /** Connects and keeps connected until stop(); samples the GPUs every gpuSampleMs (default: every heartbeat). */
  start(): void {
    this.#sampleTimer = (this.#o.clock ?? SYSTEM_CLOCK).setInterval(() => {
      this.#sampling ??= this.#sample().finally(() => {
        this.#sampling = undefined;
      });
    }, this.#o.gpuSampleMs ?? this.#o.heartbeatMs);
    this.#connection.start();
  }

  /** Closes the stream. Engines keep running: they outlive the agent. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#logRequests.cancelAll();
    (this.#o.clock ?? SYSTEM_CLOCK).clearInterval(this.#sampleTimer);
    await this.#sampling;
    await this.#connection.stop();
  }

  /** The supervisor's word on a shard: said to the control plane (again after a reconnect, until acknowledged). */
  onShardEvent(e: ShardEvent): void {
    if (e.state === "stopped" || e.state === "failed") this.#o.metrics.engineExits.inc({ outcome: e.state });
    this.#updateEngineGauge();
    const sent = this.#connection.send({
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
    this.#o.observe?.({ type: "shard", event: e, sent });
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
      // Problems go in heartbeats, once per occurrence: the control plane keeps them until cleared.
      gpus: this.#watch.present().map(({ gpu, memoryUsedMb }) => ({
        ...gpu,
        memoryUsedMb: BigInt(memoryUsedMb),
        problems: [],
      })),
      fabrics: o.hardware.fabrics,
      // What runs now, adopted engines included; an empty list is information.
      runningShards: o.supervisor
        .shards()
        .filter((s) => s.state === "starting" || s.state === "running" || s.state === "draining")
        // A shard on a GPU gone is reported failed (hardware-watch.ts), not running.
        .filter((s) => s.gpuIndices.every((i) => this.#watch.has(i)))
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
    const nodeProblems = this.#pendingNodeProblems;
    this.#pendingProblems = [];
    this.#pendingNodeProblems = [];
    this.#o.observe?.({ type: "heartbeat" });
    return {
      gpuMemoryUsedMb: this.#watch.present().map((g) => BigInt(g.memoryUsedMb)),
      gpuProblems: problems,
      newProblems: nodeProblems,
      shardLoad: this.#o.supervisor.loads(),
    };
  }

  #onConnectionEvent(e: ConnectionEvent): void {
    const { logger: log, metrics: m } = this.#o;
    this.#o.observe?.({ type: "connection", event: e });
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
        this.#logRequests.cancelAll();
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
        void this.#answer(
          "drain",
          m.msg.value.commandId,
          m.msg.value.shardId,
          this.#drain(m.msg.value),
          undefined,
          Number(m.msg.value.deadlineUnixMs),
        );
        return;
      case "engineLog":
        this.#logRequests.handle(m.msg.value);
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
    deadlineUnixMs?: number,
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
    this.#o.observe?.({
      type: "command",
      command,
      commandId,
      shardId,
      outcome: r,
      ...(deadlineUnixMs !== undefined ? { deadlineUnixMs } : {}),
    });
    // After the result, so the replica's failure reads as a refused start.
    if (!r.ok && r.shardFailed && command === "start" && replicaId !== undefined)
      this.onShardEvent({ shardId, replicaId, state: "failed", error: r.error });
  }

  #start(cmd: StartShard): Promise<CommandOutcome> {
    if (cmd.gpuIndices.length === 0) return Promise.resolve({ ok: false, error: "no GPU indices given" });
    const bad = cmd.gpuIndices.find((i) => !this.#watch.has(i));
    if (bad !== undefined)
      return Promise.resolve({
        ok: false,
        error: `GPU index ${bad} is not on this node now (it has ${this.#watch
          .present()
          .map((g) => g.gpu.index)
          .join(", ")})`,
      });
    return this.#o.supervisor.start({
      shardId: cmd.shardId,
      replicaId: cmd.replicaId,
      model: cmd.model,
      profile: cmd.profile,
      engine: cmd.engine === "" ? "default" : cmd.engine,
      gpuIndices: [...cmd.gpuIndices],
      gpuUuids: cmd.gpuIndices.map((i) => this.#watch.uuidOf(i)),
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
    let outcome: ReturnType<HardwareWatch["observe"]>;
    try {
      outcome = this.#watch.observe(await this.#o.gpus.sample());
    } catch (err) {
      // The last good sample stands; after a few failures in a row it is a node problem, not frozen figures.
      const reason = err instanceof Error ? err.message : String(err);
      this.#o.metrics.gpuSampleFailures.inc();
      this.#o.logger.error({ err: reason }, "GPU sample failed");
      const problem = this.#watch.failed(reason);
      if (problem !== undefined && !this.#stopped) {
        this.#o.metrics.gpuProblems.inc({ kind: "node" });
        this.#o.logger.warn({ problem }, "node problem");
        this.#pendingNodeProblems.push(problem);
      }
      return;
    }
    this.#watch.forEachPresent((index, mb) => {
      // The gauge is set when the figure moved: setting it (label checks and hashing) cost more than the sample.
      if (this.#gaugedMemory.get(index) === mb) return;
      this.#gaugedMemory.set(index, mb);
      this.#o.metrics.gpuMemoryUsed.set({ gpu: String(index) }, mb);
    });
    for (const p of outcome.problems) this.#noteProblem(p);
    if (outcome.changes.length > 0 && !this.#stopped) this.#hardwareChanged(outcome.changes);
  }

  /** GPUs left, came back or were swapped: shards on a GPU gone fail, and the node registers again. */
  #hardwareChanged(changes: GpuChange[]): void {
    this.#o.logger.warn({ changes }, "the node's GPUs changed: registering again");
    const gone = new Map(
      changes.filter((c) => c.kind === "gone" || c.kind === "swapped").map((c) => [c.index, c]),
    );
    for (const s of this.#o.supervisor.shards()) {
      if (s.state !== "starting" && s.state !== "running" && s.state !== "draining") continue;
      const lost = s.gpuIndices.map((i) => gone.get(i)).find((c) => c !== undefined);
      if (!lost) continue;
      const error =
        lost.kind === "gone"
          ? `GPU ${lost.index} (${lost.uuid}) is no longer listed by nvidia-smi`
          : `GPU ${lost.index} was replaced (${lost.previousUuid} is now ${lost.uuid})`;
      this.onShardEvent({ shardId: s.shardId, replicaId: s.replicaId, state: "failed", error });
      // Its engine is stopped too: what is left of it holds memory on the GPUs that remain.
      void this.#o.supervisor.stop(s.shardId).catch((err: unknown) => {
        this.#o.logger.warn({ shard: s.shardId, err: String(err) }, "stopping a shard on a GPU gone");
      });
    }
    this.#connection.reregister();
  }

  /** A new problem occurrence: said in the next heartbeat. */
  #noteProblem(p: GpuProblemInit): void {
    this.#o.metrics.gpuProblems.inc({ kind: kindName(p.kind) });
    this.#o.logger.warn(
      { gpu: p.gpuIndex ?? 0, kind: kindName(p.kind), problem: p.message ?? "" },
      "GPU problem",
    );
    this.#pendingProblems.push(p);
  }
}
