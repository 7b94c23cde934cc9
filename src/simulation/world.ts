/**
 * Everything one seed runs: the scheduler, the in-memory log, the gateways,
 * the reconciler candidates, the nodes (the real `NodeAgent` with the
 * simulator's GPUs and engines, on simulated time and the simulated
 * network), and the operator's first catalog. Built from the options and
 * the seed alone.
 */
import type { AgentClock } from "../agent/client/index.js";
import { AgentMetrics } from "../agent/metrics.js";
import { parseGatewayConfig } from "../gateway/config.js";
import type { AckedMessage } from "../invariants/index.js";
import { DEFAULT_RECONCILER_CONFIG, type ReconcilerConfig } from "../reconciler/decide/index.js";
import { parseSimConfig, type SimConfig } from "../sim/config.js";
import { type NodeFaultPlan, planFaults } from "../sim/fault-plan.js";
import { SimNode } from "../sim/node.js";
import { type Rng, seededRng } from "../sim/rng.js";
import { catalogEvent, initialCatalog } from "./catalog.js";
import { simulatedEngines } from "./engines.js";
import { SimGateway } from "./gateway.js";
import { seededId } from "./ids.js";
import { MemoryLog, type StoredRecord } from "./memory-log.js";
import { SimNetwork } from "./network.js";
import type { SimulationOptions } from "./options.js";
import { Lease, SimReconciler } from "./reconciler.js";
import { Scheduler } from "./scheduler.js";

/**
 * The defaults, with the ready timeout an operator would set for engines
 * that load in 20 s (startDelayMs): 5 minutes, not the default 20. A hung
 * engine is found only at that deadline, so with the default a hang that
 * starts just before faults stop outlives the convergence window (seed 109:
 * a replacement hung starting at minute 40 was still starting at 60).
 */
const SIM_RECONCILER_CONFIG: ReconcilerConfig = { ...DEFAULT_RECONCILER_CONFIG, readyTimeoutMs: 5 * 60_000 };

/** Simulated time starts here (2027-01-15): far from any real clock, the same every run. */
export const SIM_EPOCH_MS = 1_800_000_000_000;

/** The gateways' lease: a crashed gateway counts as live this long, then its sessions are expired. */
export const GATEWAY_LEASE_MS = 10_000;

/** One agent metrics registry for every run of a process: what runs reads none of it. */
let sharedMetrics: AgentMetrics | undefined;

/** Independent draws per purpose, so adding draws to one (a new fault) leaves the others' sequences alone. */
function rngFor(seed: number, purpose: number): Rng {
  return seededRng((Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) + Math.imul(purpose, 0xc2b2ae35)) >>> 0);
}

export class World {
  readonly scheduler = new Scheduler(SIM_EPOCH_MS);
  readonly log: MemoryLog;
  readonly gateways = new Map<string, SimGateway>();
  readonly reconcilers: SimReconciler[] = [];
  readonly lease = new Lease(15_000);
  readonly network: SimNetwork;
  readonly nodes: SimNode[] = [];
  readonly simConfig: SimConfig;
  /** Messages the agents saw acknowledged: each must be in the log once. */
  readonly acked: AckedMessage[] = [];
  /** When each crashed gateway went down (its lease runs out GATEWAY_LEASE_MS later). */
  readonly gatewayDownSince = new Map<string, number>();
  readonly rng: { ids: Rng; faults: Rng; net: Rng; agents: Rng; log: Rng };
  readonly newId: () => string;
  readonly clock: AgentClock;
  /** Faults stopped (engine and GPU faults too: no more are drawn). */
  faultsOver = false;
  /** Told of every stored record, after the log stored it. */
  onStored: (r: StoredRecord) => void = () => {};

  constructor(readonly options: SimulationOptions) {
    const seed = options.seed;
    this.rng = {
      ids: rngFor(seed, 1),
      faults: rngFor(seed, 2),
      net: rngFor(seed, 3),
      agents: rngFor(seed, 4),
      log: rngFor(seed, 5),
    };
    const ids = this.rng.ids;
    this.newId = () => seededId(ids);
    this.clock = this.scheduler.clock(this.newId);
    this.log = new MemoryLog({
      scheduler: this.scheduler,
      random: this.rng.log,
      duplicateWindowMs: 120_000,
      latencyMs: 1,
      onStored: (r) => this.#stored(r),
    });
    const gatewayIds = Array.from({ length: options.gateways }, (_, i) => `gw-${i}`);
    for (const id of gatewayIds) {
      this.gateways.set(
        id,
        new SimGateway({
          config: parseGatewayConfig({ id, insecureDev: true, version: "sim", leaseTtlMs: GATEWAY_LEASE_MS }),
          listenAddress: SimNetwork.url(id),
          scheduler: this.scheduler,
          log: this.log,
          newId: this.newId,
        }),
      );
    }
    this.network = new SimNetwork(this.scheduler, this.rng.net, this.gateways);
    for (let i = 0; i < options.reconcilers; i++) {
      this.reconcilers.push(
        new SimReconciler({
          id: `reconciler-${i}`,
          scheduler: this.scheduler,
          log: this.log,
          lease: this.lease,
          config: SIM_RECONCILER_CONFIG,
          liveGateways: () => this.liveGateways(),
          newId: this.newId,
          tickMs: 500 + 100 * i,
        }),
      );
    }
    const engineFaults = options.faults.includes("engine");
    const gpuFaults = options.faults.includes("gpu");
    this.simConfig = parseSimConfig({
      gateways: gatewayIds.map(SimNetwork.url),
      insecureDev: true,
      nodes: options.nodes,
      heartbeatMs: options.heartbeatMs,
      startDelayMs: 20_000,
      drainMs: 5_000,
      reconnectMinMs: 250,
      reconnectMaxMs: 15_000,
      ackTimeoutMs: 10_000,
      faults: [
        ...(engineFaults
          ? ["fail", "crash-loop", "hang", "never-starting", "exit-after-running", "slow-start"]
          : []),
        ...(gpuFaults ? ["xid"] : []),
      ],
      faultRate: engineFaults || gpuFaults ? 0.03 : 0,
      xidAfterHeartbeats: 100,
    });
    if (sharedMetrics === undefined) sharedMetrics = new AgentMetrics();
    for (let i = 0; i < options.nodes; i++) {
      const nodeId = `node-${String(i).padStart(4, "0")}`;
      this.nodes.push(
        new SimNode({
          nodeId,
          position: i,
          config: this.simConfig,
          faults: this.#untilFaultsStop(planFaults(this.simConfig, nodeId, this.rng.agents)),
          rng: this.rng.agents,
          tls: undefined,
          metrics: sharedMetrics,
          emit: (e) => {
            if (e.type === "acked")
              this.acked.push({ nodeId: e.nodeId, sessionId: e.sessionId, messageId: e.messageId });
          },
          clock: this.clock,
          connect: this.network.connectFor(nodeId),
          engines: simulatedEngines,
        }),
      );
    }
  }

  /** A node's engine faults stop with the others: starts after that run clean. */
  #untilFaultsStop(plan: NodeFaultPlan): NodeFaultPlan {
    return {
      nodeFaults: plan.nodeFaults,
      shardFault: (args) => (this.faultsOver ? undefined : plan.shardFault(args)),
    };
  }

  /** Gateways whose lease is live: up, or down for less than the lease. */
  liveGateways(): Set<string> {
    const now = this.scheduler.now;
    const out = new Set<string>();
    for (const g of this.gateways.values()) {
      const down = this.gatewayDownSince.get(g.id);
      if (g.up || (down !== undefined && now - down < GATEWAY_LEASE_MS)) out.add(g.id);
    }
    return out;
  }

  /** Starts everything at simulated time zero: gateways say they started, the operator applies the catalog, agents connect. */
  start(): void {
    for (const g of this.gateways.values()) g.start();
    this.log.appender.appendWith(
      catalogEvent(`catalog-${this.newId()}`, initialCatalog(this.options.nodes), this.scheduler.now),
      { expectLastSubjectSeq: 0 },
      { appended() {}, failed() {} },
    );
    for (const r of this.reconcilers) r.start();
    for (const n of this.nodes) n.start();
  }

  #followedAt = 0;

  /** Gateways follow the log a few milliseconds behind it, in its order. */
  #stored(r: StoredRecord): void {
    this.onStored(r);
    const s = this.scheduler;
    const at = Math.max(this.#followedAt, s.now + 2 + 3 * this.rng.net());
    this.#followedAt = at;
    s.after(at - s.now, () => {
      for (const g of this.gateways.values()) g.onRecord(r);
    });
  }
}
