/**
 * Given/when/then for the reconciler: a fleet built by folding real events
 * (the same fold the reconciler's projection runs), `decide` on it, and the
 * pass folded back as a reconcilePass event, so tests exercise the fold and
 * decide together. Figures follow the fleet facts (H100 80 GB nodes, NVLink
 * inside a node, InfiniBand pods between nodes).
 */
import { create } from "@bufbuild/protobuf";
import type { EventInit } from "../../src/codec/index.js";
import { GpuProblem_Kind, ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import {
  type Command,
  type Decision,
  type Event,
  EventSchema,
  SessionClosed_Reason,
  Writer_Kind,
} from "../../src/gen/llmgw/v1/events_pb.js";
import { evolveFleet, type FleetState, initialFleet } from "../../src/projections/index.js";
import {
  DEFAULT_RECONCILER_CONFIG,
  type DecideOutput,
  decide,
  type ReconcilerConfig,
  verifyKeptRoutes,
} from "../../src/reconciler/index.js";
import { verifyKeptView } from "../../src/reconciler/placement/index.js";
import { h100Hardware, registrationOf } from "../../src/sim/index.js";
import { type RunningInit, runningShards } from "./fleet-events.js";

/** A pass's body as a hand-written event takes it. */
type PassInit = Extract<NonNullable<EventInit["body"]>, { case: "reconcilePass" }>["value"];

export const T0 = 1_780_000_000_000;
const GIB = 1024;

export interface NodeSpec {
  gpus?: number;
  product?: string;
  memoryGb?: number;
  /** Memory in use per GPU at registration, GiB (foreign processes). */
  usedGb?: number[];
  /** Problems per GPU index. */
  problems?: Record<number, string[]>;
  /** InfiniBand pod name, or null for none. */
  ib?: string | null;
  labels?: Record<string, string>;
  running?: RunningInit[];
  /** Register.advertise_address; none by default. */
  advertiseAddress?: string;
}

export interface ProfileInit {
  name: string;
  shards?: number;
  gpus: number;
  memGb: number;
  product?: string;
  fabric?: string;
  labels?: Record<string, string>;
  readyTimeoutMs?: number;
  /** Profile.engine; none (the default engine) by default. */
  engine?: string;
}

export function model(name: string, replicas: number, ...profiles: ProfileInit[]) {
  return {
    name,
    replicas,
    profiles: profiles.map((p) => ({
      name: p.name,
      shards: p.shards ?? 1,
      gpusPerShard: p.gpus,
      memoryPerGpuMb: BigInt(p.memGb * GIB),
      gpuProduct: p.product ?? "H100",
      fabricKind: p.fabric ?? "",
      nodeLabels: p.labels ?? {},
      engineArgs: ["--tensor-parallel-size", String(p.gpus)],
      engineEnv: { VLLM_USE_V1: "1" },
      readyTimeoutMs: p.readyTimeoutMs ?? 0,
      engine: p.engine ?? "",
    })),
  };
}

export const llama8b = (n: number) => model("llama-3.1-8b", n, { name: "tp1", gpus: 1, memGb: 20 });
export const llama70b = (n: number) => model("llama-3.3-70b", n, { name: "tp4", gpus: 4, memGb: 72 });
export const llama405b = (n: number) =>
  model("llama-3.1-405b", n, { name: "tp8-pp2", shards: 2, gpus: 8, memGb: 72, fabric: "infiniband" });

export type ModelInit = ReturnType<typeof model> & {
  rollout?: { maxSurge?: number; maxUnavailable?: number; progressDeadlineMs?: number };
  /** The disruption budget as the catalog states it ("2", "75%"). */
  minAvailable?: string;
};

export function registration(nodeId: string, spec: NodeSpec = {}) {
  const hw = h100Hardware(nodeId, {
    gpus: spec.gpus ?? 8,
    ...(spec.product ? { product: spec.product } : {}),
    memoryMb: (spec.memoryGb ?? 80) * GIB,
    pod: spec.ib === undefined ? "ib-pod-1" : spec.ib,
  });
  return registrationOf(nodeId, hw, {
    agentVersion: "1.8.2",
    usedMb: (spec.usedGb ?? []).map((g) => g * GIB),
    ...(spec.problems ? { problems: spec.problems } : {}),
    runningShards: runningShards(spec.running),
    labels: spec.labels ?? { zone: "eu-west-1a", pool: "general" },
    ...(spec.advertiseAddress ? { advertiseAddress: spec.advertiseAddress } : {}),
  });
}

/** A fleet under test: events folded as they are added, passes decided and folded back. */
export class Fleet {
  state: FleetState = initialFleet();
  nowMs = T0;
  config: ReconcilerConfig = { ...DEFAULT_RECONCILER_CONFIG };
  readonly events: Array<{ seq: number; timeMs: number; event: Event }> = [];
  /** Gateways whose lease is live (decide's liveGateways). */
  readonly live = new Set<string>(["gw-1"]);
  /** When set, `obey` reports a running shard's endpoint as this gives it (the routing table's input). */
  endpointOf: ((nodeId: string, shardId: string) => string) | undefined;
  #sessions = 0;
  #sessionSeq = new Map<string, number>();

  constructor(config: Partial<ReconcilerConfig> = {}) {
    this.config = { ...this.config, ...config };
    this.apply({
      case: "gatewayStarted",
      value: { gatewayId: "gw-1", listenAddress: ":8443", version: "0.1.0", leaseTtlMs: 10_000 },
    });
  }

  apply(body: EventInit["body"], kind = Writer_Kind.GATEWAY): Event {
    const seq = this.state.seq + 1;
    const event = create(EventSchema, {
      id: `e-${seq}`,
      timeUnixMs: BigInt(this.nowMs),
      writer: { kind, id: "test" },
      body,
    });
    this.events.push({ seq, timeMs: this.nowMs, event });
    this.state = evolveFleet(this.state, event, { seq, timeMs: this.nowMs });
    checkIndexes(this.state);
    return event;
  }

  /**
   * A pass written by hand (not decided here): `decisions` and `commands`,
   * decided on the log up to `observedSeq` (default: all of it), by
   * `leaderId` under `leaseRevision`. For the checker's tests: a log no
   * correct decide would write.
   */
  handPass(
    decisions: PassInit["decisions"],
    opts: {
      observedSeq?: number | undefined;
      leaderId?: string | undefined;
      leaseRevision?: number | undefined;
      commands?: PassInit["commands"] | undefined;
    } = {},
  ): Event {
    return this.apply(
      {
        case: "reconcilePass",
        value: {
          leaderId: opts.leaderId ?? "rec-1",
          leaseRevision: BigInt(opts.leaseRevision ?? 0),
          observedSeq: BigInt(opts.observedSeq ?? this.state.seq),
          nowUnixMs: BigInt(this.nowMs),
          trigger: "events",
          decisions: decisions ?? [],
          commands: opts.commands ?? [],
        },
      },
      Writer_Kind.RECONCILER,
    );
  }

  advance(ms: number): this {
    this.nowMs += ms;
    return this;
  }

  /** A fleet with this catalog, then these nodes connected (in that order); nothing decided yet. */
  static of(models: ModelInit[], nodes: string[]): Fleet {
    const f = new Fleet();
    f.catalog(...models);
    for (const n of nodes) f.connect(n);
    return f;
  }

  catalog(...models: ModelInit[]): this {
    this.apply(
      { case: "catalogChanged", value: { appliedBy: "ops", catalog: { models } } },
      Writer_Kind.OPERATOR,
    );
    return this;
  }

  connect(nodeId: string, spec: NodeSpec = {}, gatewayId = "gw-1"): string {
    const sessionId = `s-${++this.#sessions}`;
    this.#sessionSeq.set(sessionId, 1);
    this.apply({
      case: "sessionOpened",
      value: { nodeId, sessionId, gatewayId, registration: registration(nodeId, spec), identity: "mtls" },
    });
    return sessionId;
  }

  disconnect(nodeId: string): this {
    const s = this.state.inventory.nodes.get(nodeId)?.session;
    if (!s) throw new Error(`${nodeId} has no session`);
    this.apply({
      case: "sessionClosed",
      value: {
        nodeId,
        sessionId: s.sessionId,
        gatewayId: s.gatewayId,
        reason: SessionClosed_Reason.DISCONNECTED,
      },
    });
    return this;
  }

  #next(nodeId: string): { sessionId: string; sessionSeq: bigint } {
    const sessionId = this.state.inventory.nodes.get(nodeId)?.session?.sessionId ?? "none";
    const n = (this.#sessionSeq.get(sessionId) ?? 1) + 1;
    this.#sessionSeq.set(sessionId, n);
    return { sessionId, sessionSeq: BigInt(n) };
  }

  usage(nodeId: string, usedGb: number[], problems: string[] = []): this {
    this.apply({
      case: "usageChanged",
      value: {
        nodeId,
        ...this.#next(nodeId),
        gpuMemoryUsedMb: usedGb.map((g) => BigInt(g * GIB)),
        newProblems: problems,
      },
    });
    return this;
  }

  /** A usage event carrying shard load (what the gateway writes when load moved). */
  load(nodeId: string, loads: Array<{ shardId: string; queueDepth: number; kvCacheUse?: number }>): this {
    this.apply({
      case: "usageChanged",
      value: {
        nodeId,
        ...this.#next(nodeId),
        shardLoad: loads.map((l) => ({ kvCacheUse: 0, ...l })),
      },
    });
    return this;
  }

  shard(
    nodeId: string,
    replicaId: string,
    shardId: string,
    state: ShardStatus_State,
    error = "",
    endpoint = "",
  ): this {
    this.apply({
      case: "shardStatus",
      value: {
        nodeId,
        ...this.#next(nodeId),
        status: { replicaId, shardId, state, error, exitCode: error ? 1 : 0, endpoint },
      },
    });
    return this;
  }

  result(nodeId: string, commandId: string, ok = true, error = ""): this {
    this.apply({
      case: "commandResult",
      value: { nodeId, ...this.#next(nodeId), result: { commandId, ok, error } },
    });
    return this;
  }

  cordon(nodeId: string): this {
    this.apply(
      { case: "nodeCordoned", value: { nodeId, reason: "firmware", operator: "alice" } },
      Writer_Kind.OPERATOR,
    );
    return this;
  }
  uncordon(nodeId: string): this {
    this.apply({ case: "nodeUncordoned", value: { nodeId, operator: "alice" } }, Writer_Kind.OPERATOR);
    return this;
  }
  drain(nodeId: string): this {
    this.apply(
      { case: "nodeDrainRequested", value: { nodeId, reason: "RMA", operator: "bob" } },
      Writer_Kind.OPERATOR,
    );
    return this;
  }

  /** A heartbeat's problem on one GPU, as the gateway records it. */
  gpuProblem(nodeId: string, gpuIndex: number, message = "Xid 79: GPU has fallen off the bus"): this {
    this.apply({
      case: "usageChanged",
      value: {
        nodeId,
        ...this.#next(nodeId),
        gpuProblems: [{ gpuIndex, kind: GpuProblem_Kind.XID, message }],
      },
    });
    return this;
  }
  clearGpu(nodeId: string, gpuIndex: number, nodeLevel = false): this {
    this.apply(
      {
        case: "gpuProblemsCleared",
        value: { nodeId, gpuIndex, nodeLevel, operator: "alice", reason: "reseated" },
      },
      Writer_Kind.OPERATOR,
    );
    return this;
  }
  cordonGpu(nodeId: string, gpuIndex: number): this {
    this.apply(
      { case: "gpuCordoned", value: { nodeId, gpuIndex, reason: "fan", operator: "alice" } },
      Writer_Kind.OPERATOR,
    );
    return this;
  }
  uncordonGpu(nodeId: string, gpuIndex: number): this {
    this.apply(
      { case: "gpuUncordoned", value: { nodeId, gpuIndex, operator: "alice" } },
      Writer_Kind.OPERATOR,
    );
    return this;
  }

  decide(): DecideOutput {
    const out = decide({
      state: this.state,
      config: this.config,
      nowMs: this.nowMs,
      liveGateways: this.live,
    });
    checkIndexes(this.state);
    return out;
  }

  /** Folds a pass's output back into the state, as the leader's append would. */
  fold(out: DecideOutput): this {
    if (out.decisions.length === 0 && out.commands.length === 0) return this;
    this.apply(
      {
        case: "reconcilePass",
        value: {
          leaderId: "rec-1",
          observedSeq: BigInt(this.state.seq),
          nowUnixMs: BigInt(this.nowMs),
          decisions: out.decisions,
          commands: out.commands,
          truncated: out.truncated,
          trigger: "events",
        },
      },
      Writer_Kind.RECONCILER,
    );
    return this;
  }

  /** decide, then fold the result. */
  step(): DecideOutput {
    const out = this.decide();
    this.fold(out);
    return out;
  }

  /** Passes until one decides nothing (level-triggered convergence); returns the passes that did something. */
  settle(max = 10): DecideOutput[] {
    const outs: DecideOutput[] = [];
    for (let i = 0; i < max; i++) {
      const out = this.step();
      if (out.decisions.length === 0 && out.commands.length === 0) return outs;
      outs.push(out);
    }
    throw new Error(
      `no convergence after ${max} passes: ${JSON.stringify(kinds(outs.at(-1)?.decisions ?? []))}`,
    );
  }

  /** The agents do what they are told: every start/stop/drain gets a result and the matching status. */
  obey(out: DecideOutput, state: "running" | "failed" = "running"): this {
    for (const c of out.commands) {
      const a = c.action;
      if (this.state.inventory.nodes.get(c.nodeId)?.session?.sessionId !== c.sessionId) continue;
      this.result(c.nodeId, c.commandId);
      if (a.case === "start") {
        this.shard(
          c.nodeId,
          a.value.replicaId,
          a.value.shardId,
          state === "running" ? ShardStatus_State.RUNNING : ShardStatus_State.FAILED,
          state === "failed" ? "CUDA out of memory" : "",
          state === "running" ? (this.endpointOf?.(c.nodeId, a.value.shardId) ?? "") : "",
        );
      } else if (a.case === "stop" || a.case === "drain") {
        const replica = replicaOf(this.state, a.value.shardId);
        if (replica) this.shard(c.nodeId, replica, a.value.shardId, ShardStatus_State.STOPPED);
      }
    }
    return this;
  }

  /** Settles, obeying every pass's commands, until nothing is left to do. */
  run(max = 20): DecideOutput[] {
    const outs: DecideOutput[] = [];
    for (let i = 0; i < max; i++) {
      const out = this.step();
      if (out.decisions.length === 0 && out.commands.length === 0) return outs;
      outs.push(out);
      this.obey(out);
    }
    throw new Error(`no convergence after ${max} passes`);
  }

  replicasOf(modelName: string) {
    return this.state.replicas.replicas.values().filter((r) => r.model === modelName);
  }
}

/**
 * Every index of the node and replica tables (their groups, the shard
 * owners, the key lists) must answer what a rebuild would, after every
 * event and every pass (a pass's fork gives them back when released). So
 * must the placement view kept across passes.
 */
function checkIndexes(state: FleetState): void {
  state.inventory.nodes.verify();
  state.replicas.replicas.verify();
  verifyKeptView(state);
  verifyKeptRoutes(state);
}

function replicaOf(state: FleetState, shardId: string): string {
  for (const r of state.replicas.replicas.values())
    if (r.shards.some((s) => s.shardId === shardId)) return r.replicaId;
  return "";
}

/**
 * A fleet mid-way: replicas running, a node lost, the catalog changed, so
 * the next pass fails, stops, creates and places.
 */
export function busyFleet(): Fleet {
  const f = new Fleet();
  for (const n of ["gpu-a1", "gpu-a2", "gpu-a3", "gpu-b1"]) f.connect(n);
  f.catalog(llama70b(3), llama8b(4), llama405b(1));
  f.run();
  f.disconnect("gpu-a3").advance(f.config.lostAfterMs);
  f.catalog(llama70b(2), llama8b(6), llama405b(1));
  return f;
}

export function kinds(decisions: Decision[]): string[] {
  return decisions.map((d) => d.kind.case ?? "?");
}

export function ofKind<K extends NonNullable<Decision["kind"]["case"]>>(
  decisions: Decision[],
  kind: K,
): Array<Extract<Decision["kind"], { case: K }>["value"]> {
  return decisions.filter((d) => d.kind.case === kind).map((d) => d.kind.value) as never;
}

export function actions(commands: Command[]): string[] {
  return commands.map((c) => `${c.action.case}:${c.nodeId}`);
}
