/**
 * One simulated GPU node: holds a Connect stream to a gateway, registers,
 * heartbeats, and runs shards as state machines driven by commands and
 * timers. It persists nothing: what it knows lives in this object.
 */
import {
  AgentConnection,
  type AgentMessageInit,
  type ConnectionEvent,
  type HeartbeatInit,
  type TlsIdentity,
} from "../agent/client/index.js";
import {
  type ControlMessage,
  type DrainShard,
  EngineLogChunk_End,
  GpuProblem_Kind,
  type StartShard,
  ShardStatus_State as State,
  type StopShard,
} from "../gen/llmgw/v1/agent_pb.js";
import type { SimConfig } from "./config.js";
import type { AgentCounters, ShardStateName, SimEvent } from "./events.js";
import { zeroCounters } from "./events.js";
import type { NodeFaultPlan } from "./fault-plan.js";
import {
  CRASH_ERROR,
  CRASH_EXIT_CODE,
  oomError,
  REFUSE_START_ERROR,
  type ShardFault,
  UNASKED_EXIT_OUTPUT,
  xidProblem,
} from "./faults.js";
import { type NodeHardware, nodeHardware } from "./hardware.js";
import type { ShardLoadReading } from "./load.js";
import { SimEngineServer } from "./openai-engine.js";
import { type RegisterInit, registrationOf } from "./registration.js";
import type { Rng } from "./rng.js";

/** A simulated engine that serves HTTP (`engineHttp`): its server and, once listening, its port. */
interface ServingEngine {
  server: SimEngineServer;
  listening: Promise<number>;
  port: number | undefined;
}

export interface SimShard {
  shardId: string;
  replicaId: string;
  model: string;
  profile: string;
  gpuIndices: number[];
  state: State;
  /** The fault of a shard whose engine was launched (refused and never-started ones never get here). */
  fault: Exclude<ShardFault, "refuse-start" | "never-starting"> | undefined;
  /** Its rank in the replica (0 when unknown, e.g. preloaded). */
  rank?: number;
}

export interface AgentOptions {
  nodeId: string;
  /** 0-based place in the fleet: decides fabrics and the first gateway tried. */
  position: number;
  config: SimConfig;
  faults: NodeFaultPlan;
  rng: Rng;
  tls: TlsIdentity | undefined;
  emit: (e: SimEvent) => void;
  /** The load a running shard reports in heartbeats (src/sim/load.ts); undefined: none. */
  load?: (shard: SimShard) => ShardLoadReading | undefined;
}

const STATE_NAMES: Record<State, ShardStateName | "unspecified"> = {
  [State.UNSPECIFIED]: "unspecified",
  [State.STARTING]: "starting",
  [State.RUNNING]: "running",
  [State.DRAINING]: "draining",
  [State.STOPPED]: "stopped",
  [State.FAILED]: "failed",
};

export class SimAgent {
  readonly nodeId: string;
  readonly hardware: NodeHardware;
  readonly counters: AgentCounters = zeroCounters();
  private readonly config: SimConfig;
  private readonly shards = new Map<string, SimShard>();
  private readonly shardTimers = new Map<string, Set<NodeJS.Timeout>>();
  /** The HTTP servers of engines, by shard id (only with `engineHttp`). */
  private readonly engines = new Map<string, ServingEngine>();
  /** Memory a leaking foreign process holds, per GPU. */
  private readonly leakedMb: number[];
  /** Problems per GPU; kept across reconnects because the hardware stays broken. */
  private readonly problems: string[][];
  /** GPU problems for the next heartbeat. */
  private readonly pendingProblems: Array<{ gpuIndex: number; kind: GpuProblem_Kind; message: string }> = [];
  private readonly connection: AgentConnection;
  private partitionScheduled = false;
  private xidFired = false;
  /** Heartbeats sent on the current stream. */
  private heartbeats = 0;
  private leakTimer: NodeJS.Timeout | undefined;
  private partitionTimer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: AgentOptions) {
    this.nodeId = opts.nodeId;
    this.config = opts.config;
    this.hardware = nodeHardware(opts.nodeId, opts.position, opts.config);
    this.leakedMb = this.hardware.gpus.map(() => 0);
    this.problems = this.hardware.gpus.map(() => []);
    this.connection = this.newConnection();
  }

  /**
   * Engines that were already running on the machine before this agent
   * process started (the agent persists nothing; it finds them on the host).
   * They are reported running in the first registration. Call before start().
   */
  preload(shards: ReadonlyArray<Omit<SimShard, "state" | "fault">>): void {
    for (const s of shards) {
      const gpus = s.gpuIndices.filter((i) => i >= 0 && i < this.hardware.gpus.length);
      this.shards.set(s.shardId, { ...s, gpuIndices: gpus, state: State.RUNNING, fault: undefined });
    }
  }

  /**
   * With `engineHttp`, the preloaded engines listen before the first
   * registration, so it reports where they serve. Call before start().
   */
  async servePreloaded(): Promise<void> {
    await Promise.all([...this.shards.values()].map((s) => this.serve(s).listening));
  }

  /** Starts connecting; returns at once (the agent reconnects on its own until stopped). */
  start(): void {
    if (this.opts.faults.nodeFaults.has("leak") && !this.leakTimer) {
      // A leaking foreign process grows whether or not the node is connected.
      this.leakTimer = setInterval(() => {
        for (let i = 0; i < this.leakedMb.length; i++) this.leakedMb[i]! += this.config.leakMbPerHeartbeat;
      }, this.config.heartbeatMs);
    }
    this.connection.start();
  }

  async stop(): Promise<void> {
    clearInterval(this.leakTimer);
    this.leakTimer = undefined;
    clearTimeout(this.partitionTimer);
    for (const id of [...this.shardTimers.keys()]) this.clearShardTimers(id);
    for (const id of [...this.engines.keys()]) this.closeEngine(id);
    await this.connection.stop();
  }

  /**
   * Restarts the agent process: the stream drops and a new one registers at
   * once. `keepShards` is an agent-only restart (engines survive and are
   * reported running); otherwise the machine came back empty.
   */
  restart(opts: { keepShards: boolean }): void {
    if (!opts.keepShards) {
      for (const id of [...this.shards.keys()]) this.clearShardTimers(id);
      for (const id of [...this.engines.keys()]) this.closeEngine(id);
      this.shards.clear();
      this.leakedMb.fill(0);
    }
    this.counters.restarts++;
    this.opts.emit({ type: "restarted", nodeId: this.nodeId, keepShards: opts.keepShards });
    this.connection.restart();
  }

  get connected(): boolean {
    return this.connection.connected;
  }

  get isPartitioned(): boolean {
    return this.connection.silent;
  }

  get url(): string | undefined {
    return this.connection.url;
  }

  /** Why the last stream ended, for operators. */
  get lastDisconnectReason(): string {
    return this.connection.lastDisconnectReason;
  }

  shard(id: string): SimShard | undefined {
    const s = this.shards.get(id);
    return s && { ...s, gpuIndices: [...s.gpuIndices] };
  }

  shardList(): SimShard[] {
    return [...this.shards.keys()].map((id) => this.shard(id)!);
  }

  /** Memory in use per GPU, in MiB: pre-allocated KV caches of serving shards plus any leak. */
  memoryUsedMb(): number[] {
    return this.hardware.gpus.map((g) => {
      let used = this.leakedMb[g.index] ?? 0;
      for (const s of this.shards.values()) {
        if ((s.state === State.RUNNING || s.state === State.DRAINING) && s.gpuIndices.includes(g.index))
          used += Math.round(g.memoryTotalMb * this.config.kvCacheFraction);
      }
      return Math.min(used, g.memoryTotalMb);
    });
  }

  // --- connection -------------------------------------------------------------

  private newConnection(): AgentConnection {
    const c = this.config;
    return new AgentConnection({
      gateways: c.gateways,
      firstGateway: this.opts.position,
      protocol: c.protocol,
      tls: () => this.opts.tls,
      ackTimeoutMs: c.ackTimeoutMs,
      heartbeatMs: c.heartbeatMs,
      reconnectMinMs: c.reconnectMinMs,
      reconnectMaxMs: c.reconnectMaxMs,
      random: this.opts.rng,
      registration: () => this.registration(),
      heartbeat: () => this.heartbeat(),
      onControl: (m) => this.onControl(m),
      onEvent: (e) => this.onConnectionEvent(e),
      // A simulated agent persists nothing in flight: what a stream did not
      // carry is lost, and the next registration's running shards resynchronise.
      resendUnacked: false,
    });
  }

  private onConnectionEvent(e: ConnectionEvent): void {
    switch (e.type) {
      case "connecting":
        if (e.reconnect) this.counters.reconnects++;
        this.opts.emit({ type: "connecting", nodeId: this.nodeId, url: e.url });
        return;
      case "registered":
        this.heartbeats = 0;
        this.counters.registrations++;
        this.opts.emit({ type: "registered", nodeId: this.nodeId, url: e.url });
        this.schedulePartition();
        return;
      case "acked":
        this.opts.emit({
          type: "acked",
          nodeId: this.nodeId,
          sessionId: e.sessionId,
          messageId: e.messageId,
        });
        return;
      case "disconnected":
        this.opts.emit({ type: "disconnected", nodeId: this.nodeId, url: e.url, reason: e.reason });
        return;
      case "resent":
        return;
      default: {
        const never: never = e;
        throw new Error(`unhandled connection event ${JSON.stringify(never)}`);
      }
    }
  }

  private registration(): RegisterInit {
    return registrationOf(this.nodeId, this.hardware, {
      agentVersion: this.config.agentVersion,
      usedMb: this.memoryUsedMb(),
      problems: this.problems,
      runningShards: [...this.shards.values()].map((s) => ({
        shardId: s.shardId,
        replicaId: s.replicaId,
        model: s.model,
        profile: s.profile,
        gpuIndices: [...s.gpuIndices],
        state: s.state,
        endpoint: s.state === State.RUNNING ? this.endpoint(s) : "",
      })),
      labels: this.config.labels,
      cumulativeAcks: true,
    });
  }

  /** Sends on the current stream when registered and reachable; false when the message was lost. */
  private send(msg: AgentMessageInit): boolean {
    return this.connection.send(msg);
  }

  private schedulePartition(): void {
    if (!this.opts.faults.nodeFaults.has("partition") || this.partitionScheduled) return;
    this.partitionScheduled = true;
    this.partitionTimer = setTimeout(() => {
      // Silent from now on; the stream stays open until the gateway gives up on it.
      this.connection.silence(this.config.partitionHealMs);
      this.opts.emit({ type: "partitioned", nodeId: this.nodeId });
    }, this.config.partitionAfterMs);
  }

  private heartbeat(): HeartbeatInit {
    if (
      this.opts.faults.nodeFaults.has("xid") &&
      !this.xidFired &&
      this.heartbeats >= this.config.xidAfterHeartbeats
    )
      this.fireXid();
    this.heartbeats++;
    this.counters.heartbeatsSent++;
    return {
      gpuMemoryUsedMb: this.memoryUsedMb().map((mb) => BigInt(mb)),
      gpuProblems: this.pendingProblems.splice(0),
      shardLoad: this.shardLoad(),
    };
  }

  /** The load of each running shard whose model has a load curve. */
  private shardLoad(): Array<{ shardId: string; queueDepth: number; kvCacheUse: number }> {
    const out: Array<{ shardId: string; queueDepth: number; kvCacheUse: number }> = [];
    const load = this.opts.load;
    if (!load) return out;
    for (const s of this.shards.values()) {
      if (s.state !== State.RUNNING) continue;
      const l = load(s);
      if (l) out.push({ shardId: s.shardId, ...l });
    }
    return out;
  }

  private fireXid(): void {
    this.xidFired = true;
    const named = this.config.xidGpu;
    const gpu =
      named === undefined
        ? this.hardware.gpus[Math.floor(this.opts.rng() * this.hardware.gpus.length)]
        : this.hardware.gpus.find((g) => g.index === named);
    if (!gpu) return;
    const problem = xidProblem(gpu.index, gpu.uuid);
    this.problems[gpu.index]!.push(problem);
    // Tagged with its GPU: only that GPU leaves placement.
    this.pendingProblems.push({ gpuIndex: gpu.index, kind: GpuProblem_Kind.XID, message: problem });
    this.opts.emit({ type: "problem", nodeId: this.nodeId, problem });
    // The engine on a GPU that fell off the bus dies with it.
    for (const shard of [...this.shards.values()]) {
      if (shard.gpuIndices.includes(gpu.index)) {
        this.finish(shard, State.FAILED, {
          error: `CUDA error: unspecified launch failure (${problem})`,
          exitCode: 1,
        });
      }
    }
  }

  // --- commands --------------------------------------------------------------

  private onControl(m: ControlMessage): void {
    switch (m.msg.case) {
      case "start":
        this.counters.commandsReceived++;
        this.onStart(m.msg.value);
        return;
      case "stop":
        this.counters.commandsReceived++;
        this.onStop(m.msg.value);
        return;
      case "drain":
        this.counters.commandsReceived++;
        this.onDrain(m.msg.value);
        return;
      case "engineLog":
        // Simulated engines print nothing this agent keeps.
        if (!m.msg.value.cancel)
          this.send({
            msg: {
              case: "engineLog",
              value: {
                requestId: m.msg.value.requestId,
                end: EngineLogChunk_End.NOT_FOUND,
                error: "a simulated agent keeps no engine output",
              },
            },
          });
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

  private result(
    command: "start" | "stop" | "drain",
    commandId: string,
    shardId: string,
    error?: string,
    received: { deadlineUnixMs?: number } = {},
  ) {
    const ok = error === undefined;
    this.send({ msg: { case: "result", value: { commandId, ok, error: error ?? "" } } });
    this.opts.emit({
      type: "command",
      nodeId: this.nodeId,
      command,
      commandId,
      shardId,
      ok,
      ...(error === undefined ? {} : { error }),
      ...received,
    });
  }

  private onStart(cmd: StartShard): void {
    const existing = this.shards.get(cmd.shardId);
    if (existing) {
      // A re-issued start for a shard already here: accepted, and its state repeated.
      this.result("start", cmd.commandId, cmd.shardId);
      this.status(existing);
      return;
    }
    const bad = cmd.gpuIndices.find((i) => i >= this.hardware.gpus.length);
    if (bad !== undefined || cmd.gpuIndices.length === 0) {
      const why =
        bad === undefined
          ? "no GPU indices given"
          : `GPU index ${bad} does not exist (the node has ${this.hardware.gpus.length})`;
      this.result("start", cmd.commandId, cmd.shardId, why);
      return;
    }
    const fault = this.opts.faults.shardFault(cmd.engineArgs);
    if (fault === "refuse-start") {
      this.result("start", cmd.commandId, cmd.shardId, REFUSE_START_ERROR);
      return;
    }
    if (fault === "never-starting") {
      // Acknowledged, and then nothing: the engine process never came up.
      this.result("start", cmd.commandId, cmd.shardId);
      return;
    }
    const shard: SimShard = {
      shardId: cmd.shardId,
      replicaId: cmd.replicaId,
      model: cmd.model,
      profile: cmd.profile,
      gpuIndices: [...cmd.gpuIndices],
      state: State.STARTING,
      fault,
      rank: cmd.rank,
    };
    this.shards.set(shard.shardId, shard);
    this.result("start", cmd.commandId, cmd.shardId);
    this.status(shard);
    this.serve(shard);
    const { startDelayMs, failAfterMs, crashAfterMs, gpuMemoryMb, kvCacheFraction } = this.config;
    switch (shard.fault) {
      case "hang":
        return; // Stuck loading weights until someone stops it.
      case "fail": {
        const { error, output } = oomError(shard.gpuIndices[0]!, gpuMemoryMb, kvCacheFraction);
        this.after(shard, Math.min(failAfterMs, startDelayMs), () =>
          this.finish(shard, State.FAILED, { error, exitCode: 1, output }),
        );
        return;
      }
      case "crash-loop":
        this.afterServing(shard, startDelayMs, () => {
          this.transition(shard, State.RUNNING);
          this.after(shard, crashAfterMs, () =>
            this.finish(shard, State.FAILED, {
              error: CRASH_ERROR,
              exitCode: CRASH_EXIT_CODE,
              output: `${CRASH_ERROR}\nAborted (core dumped)`,
            }),
          );
        });
        return;
      case "exit-after-running":
        this.afterServing(shard, startDelayMs, () => {
          this.transition(shard, State.RUNNING);
          this.after(shard, crashAfterMs, () =>
            this.finish(shard, State.STOPPED, { exitCode: 0, output: UNASKED_EXIT_OUTPUT }),
          );
        });
        return;
      case undefined:
        this.afterServing(shard, startDelayMs, () => this.transition(shard, State.RUNNING));
        return;
      default: {
        const never: never = shard.fault;
        throw new Error(`unhandled fault ${String(never)}`);
      }
    }
  }

  private onStop(cmd: StopShard): void {
    const shard = this.shards.get(cmd.shardId);
    if (!shard) {
      this.result("stop", cmd.commandId, cmd.shardId, `unknown shard ${JSON.stringify(cmd.shardId)}`);
      return;
    }
    this.result("stop", cmd.commandId, cmd.shardId);
    this.finish(shard, State.STOPPED, { exitCode: 0 });
  }

  private onDrain(cmd: DrainShard): void {
    const shard = this.shards.get(cmd.shardId);
    if (!shard) {
      this.result("drain", cmd.commandId, cmd.shardId, `unknown shard ${JSON.stringify(cmd.shardId)}`);
      return;
    }
    this.result("drain", cmd.commandId, cmd.shardId, undefined, {
      deadlineUnixMs: Number(cmd.deadlineUnixMs),
    });
    if (shard.state === State.DRAINING) return;
    this.clearShardTimers(shard.shardId);
    this.engines.get(shard.shardId)?.server.drain();
    this.transition(shard, State.DRAINING);
    // The reconciler stops the shard at the deadline anyway; an engine that
    // honours it exits then, cutting off what is still in flight, and says so.
    const deadline = Number(cmd.deadlineUnixMs);
    const untilDeadline = deadline > 0 ? Math.max(0, deadline - Date.now()) : Number.POSITIVE_INFINITY;
    if (untilDeadline >= this.config.drainMs) {
      this.after(shard, this.config.drainMs, () => this.finish(shard, State.STOPPED, { exitCode: 0 }));
      return;
    }
    this.after(shard, untilDeadline, () =>
      this.finish(shard, State.STOPPED, {
        exitCode: 0,
        output: `INFO drain deadline ${new Date(deadline).toISOString()} passed with requests still in flight; exiting`,
      }),
    );
  }

  // --- shard state -------------------------------------------------------------

  private after(shard: SimShard, ms: number, fn: () => void): void {
    let timers = this.shardTimers.get(shard.shardId);
    if (!timers) {
      timers = new Set();
      this.shardTimers.set(shard.shardId, timers);
    }
    const t = setTimeout(() => {
      timers.delete(t);
      // The shard may have been stopped or replaced since.
      if (this.shards.get(shard.shardId) === shard) fn();
    }, ms);
    timers.add(t);
  }

  /**
   * `after`, but an engine that serves HTTP is running only once it listens:
   * the RUNNING status carries its address.
   */
  private afterServing(shard: SimShard, ms: number, fn: () => void): void {
    const engine = this.engines.get(shard.shardId);
    if (!engine) {
      this.after(shard, ms, fn);
      return;
    }
    this.after(shard, ms, () => {
      if (engine.port !== undefined) return fn();
      engine.listening.then(
        () => {
          if (this.shards.get(shard.shardId) === shard) fn();
        },
        () => {},
      );
    });
  }

  /** With `engineHttp`, the shard's engine listens (once); otherwise nothing. */
  private serve(shard: SimShard): { listening: Promise<unknown> } {
    const c = this.config;
    if (!c.engineHttp) return { listening: Promise.resolve() };
    const known = this.engines.get(shard.shardId);
    if (known) return known;
    const server = new SimEngineServer({
      nodeId: this.nodeId,
      replicaId: shard.replicaId,
      shardId: shard.shardId,
      model: shard.model,
      chunkMs: c.engineChunkMs,
    });
    const engine: ServingEngine = { server, listening: server.listen(c.engineHost), port: undefined };
    engine.listening.then(
      (port) => {
        engine.port = port;
      },
      (err: unknown) => {
        // No port: the engine cannot serve, as a real one that fails to bind.
        this.engines.delete(shard.shardId);
        if (this.shards.get(shard.shardId) !== shard) return;
        this.finish(shard, State.FAILED, {
          error: `engine could not listen on ${c.engineHost}: ${err instanceof Error ? err.message : String(err)}`,
          exitCode: 1,
        });
      },
    );
    this.engines.set(shard.shardId, engine);
    return engine;
  }

  private closeEngine(shardId: string): void {
    const engine = this.engines.get(shardId);
    if (!engine) return;
    this.engines.delete(shardId);
    engine.server.close();
  }

  private clearShardTimers(shardId: string): void {
    for (const t of this.shardTimers.get(shardId) ?? []) clearTimeout(t);
    this.shardTimers.delete(shardId);
  }

  private transition(shard: SimShard, state: State): void {
    shard.state = state;
    this.status(shard);
  }

  /** The engine exited: the shard leaves the node and its memory is released. */
  private finish(
    shard: SimShard,
    state: State.STOPPED | State.FAILED,
    exit: { error?: string; exitCode: number; output?: string },
  ): void {
    this.clearShardTimers(shard.shardId);
    this.closeEngine(shard.shardId);
    this.shards.delete(shard.shardId);
    shard.state = state;
    if (state === State.FAILED) this.counters.failures++;
    this.status(shard, exit);
  }

  /**
   * Where the engine serves: with `engineHttp`, the address it listens on;
   * otherwise a made-up one, one port per shard on the node from its first GPU.
   */
  private endpoint(shard: SimShard): string {
    const engine = this.engines.get(shard.shardId);
    if (engine?.port !== undefined) {
      const host = this.config.engineHost.includes(":")
        ? `[${this.config.engineHost}]`
        : this.config.engineHost;
      return `http://${host}:${engine.port}`;
    }
    return `http://${this.nodeId}:${8000 + (shard.gpuIndices[0] ?? 0)}`;
  }

  private status(shard: SimShard, exit?: { error?: string; exitCode: number; output?: string }): void {
    const sent = this.send({
      msg: {
        case: "shard",
        value: {
          replicaId: shard.replicaId,
          shardId: shard.shardId,
          state: shard.state,
          error: exit?.error ?? "",
          exitCode: exit?.exitCode ?? 0,
          lastOutput: exit?.output ?? "",
          endpoint: shard.state === State.RUNNING ? this.endpoint(shard) : "",
        },
      },
    });
    if (sent) this.counters.statusesSent++;
    const name = STATE_NAMES[shard.state];
    if (name === "unspecified") return;
    this.opts.emit({
      type: "status",
      nodeId: this.nodeId,
      shardId: shard.shardId,
      state: name,
      sent,
      ...(exit?.error ? { error: exit.error } : {}),
    });
  }
}
