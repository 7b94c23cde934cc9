/**
 * A fleet of simulated nodes in one process: the library behind `llmgw sim`,
 * and what tests and benchmarks run in-process. Each node runs the real node
 * agent on simulated GPUs and engines (node.ts), with a state directory of
 * its own under the fleet's (a temporary one unless given).
 */
import { EventEmitter } from "node:events";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TlsIdentity } from "../agent/client/index.js";
import { AgentMetrics } from "../agent/metrics.js";
import { parseSimConfig, type SimConfig, type SimConfigInput } from "./config.js";
import { type AgentCounters, type SimEvent, zeroCounters } from "./events.js";
import { planFaults } from "./fault-plan.js";
import { fleetNodeIds } from "./ids.js";
import { type ShardLoadReading, shardLoadAt } from "./load.js";
import type { LoadedShard } from "./machine-engines.js";
import { SimNode } from "./node.js";
import { seededRng } from "./rng.js";
import { loadTlsIdentity } from "./tls-identity.js";

export interface FleetSummary {
  nodes: number;
  connected: number;
  partitioned: number;
  starting: number;
  running: number;
  draining: number;
  /** Shards that failed since the fleet started. */
  failed: number;
  reconnects: number;
}

export class SimFleet {
  readonly config: SimConfig;
  private readonly agents = new Map<string, SimNode>();
  /** The agents' metrics, one registry for the whole fleet (sums over its nodes). */
  readonly metrics = new AgentMetrics();
  private readonly emitter = new EventEmitter();
  private restartTimer: NodeJS.Timeout | undefined;
  /** Resolved by stop(): a batched start waits no longer. */
  private stopSignal!: () => void;
  private readonly stopped = new Promise<void>((resolve) => {
    this.stopSignal = resolve;
  });
  private started = false;
  private startedAtMs = 0;
  /** Running replicas per model, recounted at most every 200 ms (the load splits over them). */
  private running: { atMs: number; byModel: Map<string, number> } = { atMs: -1, byModel: new Map() };

  /**
   * The nodes' certificates when given in memory (a benchmark issues
   * thousands in its own process); otherwise read from `certsDir`.
   */
  private readonly identities: ((nodeId: string) => TlsIdentity | undefined) | undefined;
  /** Where the nodes' state directories go (`<dir>/<node id>`); undefined: a temporary one, removed at stop(). */
  private readonly stateRoot: string | undefined;
  /** The temporary state directory this fleet made, removed at stop(). */
  private tempStateDir: string | undefined;

  /** Validates the configuration; throws SimConfigError naming each bad field. */
  constructor(
    config: SimConfigInput,
    opts: { identities?: (nodeId: string) => TlsIdentity | undefined; stateDir?: string } = {},
  ) {
    this.config = parseSimConfig(config);
    this.identities = opts.identities;
    this.stateRoot = opts.stateDir;
    // Many listeners (one per waiting test, the CLI) are normal here.
    this.emitter.setMaxListeners(0);
  }

  /**
   * Reads every node's certificates (unless insecure), then starts every
   * agent: all at once, `batch` at a time, each batch once the one before
   * registered, or `window` connecting at once (the next as soon as one
   * registered) (thousands of mTLS handshakes at once on a small machine
   * would outlast the agents' registration timeout, and they would only
   * start over). Resolves once every agent started.
   */
  async start(opts: { batch?: number; window?: number } = {}): Promise<void> {
    if (this.started) return;
    const c = this.config;
    const rng = seededRng(c.seed);
    const ids = fleetNodeIds(c);
    this.startedAtMs = Date.now();
    const given = this.identities;
    const tls = c.insecureDev
      ? []
      : given
        ? ids.map((id) => {
            const identity = given(id);
            if (!identity) throw new Error(`no certificate given for ${id}`);
            return identity;
          })
        : await Promise.all(ids.map((id) => loadTlsIdentity(c.certsDir, id)));
    let root = this.stateRoot;
    if (root === undefined) {
      root = await mkdtemp(join(tmpdir(), "llmgw-sim-"));
      this.tempStateDir = root;
    } else await mkdir(root, { recursive: true, mode: 0o700 });
    const stateRoot = root;
    ids.forEach((nodeId, position) => {
      const nodeRng = seededRng(Math.floor(rng() * 0xffffffff));
      this.agents.set(
        nodeId,
        new SimNode({
          nodeId,
          position,
          config: c,
          faults: planFaults(c, nodeId, nodeRng),
          rng: nodeRng,
          tls: tls[position],
          metrics: this.metrics,
          emit: (e) => this.emitter.emit("event", e),
          stateDir: join(stateRoot, nodeId),
          ...(c.load.length > 0 ? { load: (s: LoadedShard) => this.loadOf(s) } : {}),
        }),
      );
    });
    for (const [nodeId, shards] of Object.entries(c.runningShards)) this.agents.get(nodeId)?.preload(shards);
    this.started = true;
    await Promise.all([...this.agents.values()].map((a) => a.servePreloaded()));
    const nodes = [...this.agents.values()];
    const batch = opts.batch ?? 0;
    const window = opts.window ?? 0;
    if (window > 0) await this.startWindowed(nodes, window);
    else if (batch <= 0) for (const a of nodes) a.start();
    else
      for (let i = 0; i < nodes.length; i += batch) {
        const part = nodes.slice(i, i + batch);
        for (const a of part) a.start();
        const stopped = await Promise.race([
          Promise.all(part.map((a) => a.firstRegistration)).then(() => false),
          this.stopped.then(() => true),
        ]);
        if (stopped) return;
      }
    if (c.restartEveryMs > 0 && ids.length > 0) {
      this.restartTimer = setInterval(() => {
        const id = ids[Math.floor(rng() * ids.length)]!;
        this.restartNode(id);
      }, c.restartEveryMs);
    }
  }

  /**
   * Starts `nodes` with at most `window` of them connecting at once: the
   * next starts as soon as one registered, so one slow handshake holds up
   * one place in the window, not a whole batch. Resolves once every one
   * registered, or at stop().
   */
  private async startWindowed(nodes: SimNode[], window: number): Promise<void> {
    let next = 0;
    const launch = async (): Promise<void> => {
      while (next < nodes.length) {
        const a = nodes[next++]!;
        a.start();
        const stopped = await Promise.race([
          a.firstRegistration.then(() => false),
          this.stopped.then(() => true),
        ]);
        if (stopped) return;
      }
    };
    await Promise.all(Array.from({ length: Math.min(window, nodes.length) }, launch));
  }

  /** Closes every stream and waits for the agents to finish. */
  async stop(): Promise<void> {
    clearInterval(this.restartTimer);
    this.stopSignal();
    await Promise.all([...this.agents.values()].map((a) => a.stop()));
    if (this.tempStateDir !== undefined) await rm(this.tempStateDir, { recursive: true, force: true });
  }

  /** What `shard` reports now under its model's load curve, or undefined when its model has none. */
  private loadOf(shard: LoadedShard): ShardLoadReading | undefined {
    const spec = this.config.load.find((l) => l.model === shard.model);
    if (!spec) return undefined;
    const now = Date.now();
    if (now - this.running.atMs >= 200) this.running = { atMs: now, byModel: this.runningReplicas() };
    return shardLoadAt(spec, {
      seed: this.config.seed,
      tMs: now - this.startedAtMs,
      periodMs: this.config.heartbeatMs,
      replicaId: shard.replicaId,
      rank: shard.rank,
      replicas: this.running.byModel.get(shard.model) ?? 1,
      slots: this.config.loadSlots,
    });
  }

  /** Replicas with a running rank-0 shard, per model, across the fleet. */
  private runningReplicas(): Map<string, number> {
    const ids = new Map<string, Set<string>>();
    for (const a of this.agents.values())
      for (const s of a.shardList()) {
        if (s.state !== "running" || s.rank !== 0) continue;
        const set = ids.get(s.model) ?? new Set<string>();
        set.add(s.replicaId);
        ids.set(s.model, set);
      }
    return new Map([...ids].map(([m, set]) => [m, set.size]));
  }

  node(id: string): SimNode | undefined {
    return this.agents.get(id);
  }

  nodes(): SimNode[] {
    return [...this.agents.values()];
  }

  /** Restarts one node; `keepShards` defaults to the configured restart mode. */
  restartNode(id: string, opts: { keepShards?: boolean } = {}): void {
    const agent = this.agents.get(id);
    if (!agent) throw new RangeError(`no simulated node ${JSON.stringify(id)}`);
    agent.restart({ keepShards: opts.keepShards ?? this.config.restartMode === "keep" });
  }

  on(listener: (e: SimEvent) => void): () => void {
    this.emitter.on("event", listener);
    return () => this.emitter.off("event", listener);
  }

  counters(): AgentCounters {
    const sum = zeroCounters();
    for (const a of this.agents.values()) {
      for (const k of Object.keys(sum) as (keyof AgentCounters)[]) sum[k] += a.counters[k];
    }
    return sum;
  }

  summary(): FleetSummary {
    const s: FleetSummary = {
      nodes: this.agents.size,
      connected: 0,
      partitioned: 0,
      starting: 0,
      running: 0,
      draining: 0,
      failed: 0,
      reconnects: 0,
    };
    for (const a of this.agents.values()) {
      if (a.connected) s.connected++;
      if (a.isPartitioned) s.partitioned++;
      s.failed += a.counters.failures;
      s.reconnects += a.counters.reconnects;
      for (const shard of a.shardList()) {
        if (shard.state === "starting") s.starting++;
        else if (shard.state === "running") s.running++;
        else if (shard.state === "draining") s.draining++;
      }
    }
    return s;
  }
}

/** The CLI's periodic one-line summary. */
export function formatSummary(s: FleetSummary): string {
  const partitioned = s.partitioned > 0 ? ` (${s.partitioned} partitioned)` : "";
  return (
    `nodes ${s.connected}/${s.nodes} connected${partitioned} · shards ${s.running} running, ` +
    `${s.starting} starting, ${s.draining} draining, ${s.failed} failed · ${s.reconnects} reconnects`
  );
}
