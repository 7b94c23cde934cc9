/**
 * One simulated GPU node: the real node agent (`NodeAgent`, the code a GPU
 * machine runs) with simulated GPUs (`SimGpus`) and the machine's engines
 * plugged into it: by default the real engine supervisor over faked engine
 * processes (supervised-engines.ts). The node adds only what a simulator
 * needs around the agent: its events and counters, node faults that are
 * not the hardware's (a network partition), and restarts (a new agent
 * process on the same machine, its engines kept and adopted, or gone).
 *
 * Per-node cost is what lets 10,000 nodes share one process: no process is
 * spawned, the problem ledger is kept in memory, the supervisor writes only
 * its engine records and the engines' few log lines (in the node's state
 * directory), the agent's two timers (heartbeat, GPU sample) have the same
 * period on every node so Node.js keeps them all in one timer list, and the
 * fleet shares one metrics registry and a silent logger.
 */
import {
  type AgentClock,
  type AgentConnect,
  SYSTEM_CLOCK,
  type TimerHandle,
  type TlsIdentity,
} from "../agent/client/index.js";
import type { ProblemLedgerData, ProblemLedgerStore } from "../agent/hardware-watch.js";
import type { AgentMetrics } from "../agent/metrics.js";
import { NodeAgent, type NodeAgentActivity, type NodeAgentLogger } from "../agent/node-agent.js";
import type { SimConfig } from "./config.js";
import { type AgentCounters, type SimEvent, zeroCounters } from "./events.js";
import type { NodeFaultPlan } from "./fault-plan.js";
import { SimGpus } from "./gpus.js";
import { type NodeHardware, nodeHardware } from "./hardware.js";
import type { ShardLoadReading } from "./load.js";
import type {
  AgentSupervisor,
  LoadedShard,
  PreloadedShard,
  SimMachineEngines,
  SimMachineEnginesFactory,
  SimShard,
} from "./machine-engines.js";
import type { Rng } from "./rng.js";
import { supervisedSimEngines } from "./supervised-engines.js";

export interface SimNodeOptions {
  nodeId: string;
  /** 0-based place in the fleet: decides fabrics and the first gateway tried. */
  position: number;
  config: SimConfig;
  faults: NodeFaultPlan;
  rng: Rng;
  tls: TlsIdentity | undefined;
  /** Shared by the fleet's agents (one registry for all, not one per node). */
  metrics: AgentMetrics;
  emit: (e: SimEvent) => void;
  /** The load a running shard reports in heartbeats (src/sim/load.ts); undefined: none. */
  load?: (shard: LoadedShard) => ShardLoadReading | undefined;
  /** Time, timers and ids of the agent and its engines (default: the process's; `llmgw simulate` hands in simulated ones). */
  clock?: AgentClock;
  /** The agent's transport (default: HTTP/2 to the gateways; `llmgw simulate` hands in its own). */
  connect?: AgentConnect;
  /** The machine's state directory (engine records and logs); needed by the default engines. */
  stateDir?: string;
  /** The machine's engines (default: the real engine supervisor over faked processes). */
  engines?: SimMachineEnginesFactory;
}

/** The simulator's agents log nothing: what they do reaches the fleet as events. */
const SILENT: NodeAgentLogger = { info() {}, warn() {}, error() {} };

/** The agent's state directory's problem ledger, in memory: it outlives agent restarts, as the file does. */
function memoryLedger(): ProblemLedgerStore {
  let data: ProblemLedgerData | undefined;
  return {
    load: () => data,
    save: (d) => {
      data = d;
    },
  };
}

export class SimNode {
  readonly nodeId: string;
  readonly hardware: NodeHardware;
  readonly counters: AgentCounters = zeroCounters();
  readonly #o: SimNodeOptions;
  readonly #engines: SimMachineEngines;
  /** The current agent process's supervisor. */
  #supervisor: AgentSupervisor | undefined;
  readonly #gpus: SimGpus;
  readonly #ledger = memoryLedger();
  /** The agent process now (a restart replaces it); undefined before start(). */
  #agent: NodeAgent | undefined;
  /** The previous agent process stopping, after a restart. */
  #restarting: Promise<void> | undefined;
  #partitionScheduled = false;
  #partitionTimer: TimerHandle | undefined;
  #stopped = false;
  #onRegistered!: () => void;
  readonly #registered = new Promise<void>((resolve) => {
    this.#onRegistered = resolve;
  });

  constructor(opts: SimNodeOptions) {
    this.#o = opts;
    this.nodeId = opts.nodeId;
    this.hardware = nodeHardware(opts.nodeId, opts.position, opts.config);
    this.#engines = (opts.engines ?? supervisedSimEngines)({
      nodeId: opts.nodeId,
      position: opts.position,
      config: opts.config,
      faults: opts.faults,
      ...(opts.load ? { load: opts.load } : {}),
      ...(opts.clock ? { clock: opts.clock } : {}),
      ...(opts.stateDir !== undefined ? { stateDir: opts.stateDir } : {}),
    });
    this.#gpus = new SimGpus({
      hardware: this.hardware,
      config: opts.config,
      faults: opts.faults,
      rng: opts.rng,
      engines: this.#engines,
      onProblem: (problem) => opts.emit({ type: "problem", nodeId: this.nodeId, problem }),
      ...(opts.clock ? { now: () => (opts.clock as AgentClock).now() } : {}),
    });
  }

  /**
   * Engines that were already running on the machine before the agent
   * started: reported running in the first registration. Call before start().
   */
  preload(shards: readonly PreloadedShard[]): void {
    this.#engines.preload(shards, this.hardware.gpus.length);
  }

  /** The preloaded engines come up before the first registration. Call before start(). */
  servePreloaded(): Promise<void> {
    return this.#engines.servePreloaded();
  }

  /** Resolves at the node's first acknowledged registration. */
  get firstRegistration(): Promise<void> {
    return this.#registered;
  }

  /** Starts the agent; returns at once (it connects and reconnects on its own until stopped). */
  start(): void {
    if (this.#agent) return;
    const agent = this.#newAgent();
    this.#agent = agent;
    this.#startOnceAdopted(agent, this.#supervisor);
  }

  /** An agent process starts once its supervisor re-attached what runs (at once when there is nothing to adopt). */
  #startOnceAdopted(agent: NodeAgent, supervisor: AgentSupervisor | undefined): void {
    const adopt = supervisor?.adopt;
    if (!adopt) {
      agent.start();
      return;
    }
    adopt().then(
      () => {
        if (!this.#stopped && this.#agent === agent) agent.start();
      },
      (err: unknown) =>
        this.#o.emit({
          type: "problem",
          nodeId: this.nodeId,
          problem: `the agent cannot read its state directory: ${err instanceof Error ? err.message : String(err)}`,
        }),
    );
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    (this.#o.clock ?? SYSTEM_CLOCK).clearTimeout(this.#partitionTimer);
    await this.#restarting;
    await this.#agent?.stop();
    await this.#supervisor?.close?.();
    await this.#engines.close();
  }

  /**
   * Restarts the agent process: its stream ends and a new agent registers.
   * `keepShards` is an agent-only restart (the engines live on and the new
   * agent reports them running); otherwise the machine came back empty.
   */
  restart(opts: { keepShards: boolean }): void {
    if (!opts.keepShards) {
      this.#engines.clear();
      this.#gpus.reboot();
    }
    this.counters.restarts++;
    this.counters.reconnects++;
    this.#o.emit({ type: "restarted", nodeId: this.nodeId, keepShards: opts.keepShards });
    const old = this.#agent;
    if (!old || this.#stopped) return;
    const oldSupervisor = this.#supervisor;
    const next = this.#newAgent();
    const nextSupervisor = this.#supervisor;
    this.#agent = next;
    // One process after the other: the new one connects once the old one's stream is closed.
    const before = this.#restarting ?? Promise.resolve();
    this.#restarting = before
      .then(() => old.stop())
      .then(() => {
        const startNext = () => {
          if (!this.#stopped && this.#agent === next) this.#startOnceAdopted(next, nextSupervisor);
        };
        // The old process's supervisor lets go of the engines before the new one adopts them.
        const closing = oldSupervisor?.close?.();
        if (closing) return closing.then(startNext);
        startNext();
      });
  }

  get connected(): boolean {
    return this.#agent?.connected ?? false;
  }

  get isPartitioned(): boolean {
    return this.#agent?.silent ?? false;
  }

  get url(): string | undefined {
    return this.#agent?.url;
  }

  /** Why the last stream ended, for operators. */
  get lastDisconnectReason(): string {
    return this.#agent?.lastDisconnectReason ?? "";
  }

  shard(id: string): SimShard | undefined {
    return this.#engines.list().find((s) => s.shardId === id);
  }

  /** Each engine's shard id and state, no copy made. */
  forEachShardState(fn: (shardId: string, state: SimShard["state"]) => void): void {
    this.#engines.forEachState(fn);
  }

  shardList(): SimShard[] {
    return this.#engines.list();
  }

  /** Memory in use per GPU, in MiB: the engines' KV caches plus any leak. */
  memoryUsedMb(): number[] {
    return this.#gpus.memoryUsedMb();
  }

  #newAgent(): NodeAgent {
    const c = this.#o.config;
    // Shard events go to the agent process of the moment.
    this.#supervisor = this.#engines.supervisorFor((e) => this.#agent?.onShardEvent(e));
    const agent: NodeAgent = new NodeAgent({
      nodeId: this.nodeId,
      advertiseAddress: "",
      agentVersion: c.agentVersion,
      labels: c.labels,
      gateways: c.gateways,
      firstGateway: this.#o.position,
      protocol: c.protocol,
      tls: () => this.#o.tls,
      heartbeatMs: c.heartbeatMs,
      ackTimeoutMs: c.ackTimeoutMs,
      reconnectMinMs: c.reconnectMinMs,
      reconnectMaxMs: c.reconnectMaxMs,
      random: this.#o.rng,
      hardware: this.#gpus.inventory(),
      gpus: this.#gpus,
      supervisor: this.#supervisor.supervisor,
      metrics: this.#o.metrics,
      logger: SILENT,
      gpuSampleMs: c.heartbeatMs,
      problemLedger: this.#ledger,
      observe: (a) => this.#observe(a),
      ...(this.#o.clock ? { clock: this.#o.clock } : {}),
      ...(this.#o.connect ? { connect: this.#o.connect } : {}),
    });
    return agent;
  }

  #observe(a: NodeAgentActivity): void {
    const { emit } = this.#o;
    const nodeId = this.nodeId;
    switch (a.type) {
      case "connection": {
        const e = a.event;
        switch (e.type) {
          case "connecting":
            if (e.reconnect) this.counters.reconnects++;
            emit({ type: "connecting", nodeId, url: e.url });
            return;
          case "registered":
            this.counters.registrations++;
            this.#onRegistered();
            emit({ type: "registered", nodeId, url: e.url });
            this.#schedulePartition();
            return;
          case "acked":
            emit({ type: "acked", nodeId, sessionId: e.sessionId, messageId: e.messageId });
            return;
          case "disconnected":
            emit({ type: "disconnected", nodeId, url: e.url, reason: e.reason });
            return;
          case "resent":
            return;
          default: {
            const never: never = e;
            throw new Error(`unhandled connection event ${JSON.stringify(never)}`);
          }
        }
      }
      case "command": {
        this.counters.commandsReceived++;
        const r = a.outcome;
        emit({
          type: "command",
          nodeId,
          command: a.command,
          commandId: a.commandId,
          shardId: a.shardId,
          ok: r.ok,
          ...(r.ok ? {} : { error: r.error }),
          ...(a.deadlineUnixMs !== undefined ? { deadlineUnixMs: a.deadlineUnixMs } : {}),
        });
        return;
      }
      case "heartbeat":
        this.counters.heartbeatsSent++;
        return;
      case "shard": {
        const e = a.event;
        if (a.sent) this.counters.statusesSent++;
        if (e.state === "failed") this.counters.failures++;
        emit({
          type: "status",
          nodeId,
          shardId: e.shardId,
          state: e.state,
          sent: a.sent,
          ...(e.error ? { error: e.error } : {}),
        });
        return;
      }
      default: {
        const never: never = a;
        throw new Error(`unhandled agent activity ${JSON.stringify(never)}`);
      }
    }
  }

  /** A partitioned node goes silent once, `partitionAfterMs` after its first registration. */
  #schedulePartition(): void {
    if (!this.#o.faults.nodeFaults.has("partition") || this.#partitionScheduled) return;
    this.#partitionScheduled = true;
    this.#partitionTimer = (this.#o.clock ?? SYSTEM_CLOCK).setTimeout(() => {
      // Silent from now on; the stream stays open until the gateway gives up on it.
      this.#agent?.silence(this.#o.config.partitionHealMs);
      this.#o.emit({ type: "partitioned", nodeId: this.nodeId });
    }, this.#o.config.partitionAfterMs);
  }
}
