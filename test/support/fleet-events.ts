/**
 * Builders for realistic fleet events (H100 8-GPU nodes on InfiniBand pods,
 * the reconciler's passes, operator intent), used by the projection tests,
 * the golden log and the replay benchmark. Ids and writer times come from a
 * counter, so the same calls always build the same events.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import type { EventInit } from "../../src/codec/index.js";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import {
  type CommandSchema,
  type DecisionSchema,
  type Event,
  EventSchema,
  Liveness,
  type ModelSchema,
  SessionClosed_Reason,
  Writer_Kind,
} from "../../src/gen/llmgw/v1/events_pb.js";
import { h100Hardware, type RegisterInit, registrationOf } from "../../src/sim/index.js";

export { Liveness, SessionClosed_Reason, ShardStatus_State };

const GIB = 1024;
export type DecisionInit = MessageInitShape<typeof DecisionSchema>;
export type CommandInit = MessageInitShape<typeof CommandSchema>;
export type ModelInit = MessageInitShape<typeof ModelSchema>;
export type { RegisterInit };

export interface RunningInit {
  shard: string;
  replica: string;
  model: string;
  profile: string;
  gpus: number[];
  state?: ShardStatus_State;
  endpoint?: string;
}

/** The running shards a registration lists. */
export function runningShards(running: readonly RunningInit[] = []) {
  return running.map((r) => ({
    shardId: r.shard,
    replicaId: r.replica,
    model: r.model,
    profile: r.profile,
    gpuIndices: r.gpus,
    state: r.state ?? ShardStatus_State.RUNNING,
    endpoint: r.endpoint ?? "",
  }));
}

/** A running Llama 3.3 70B shard on 4 GPUs (tp4). */
export const s70 = (shard: string, replica: string, gpus: number[]): RunningInit => ({
  shard,
  replica,
  model: "llama-3.3-70b",
  profile: "tp4",
  gpus,
});

/** The registration of an H100 80 GB node with 8 GPUs, NVLink inside and an InfiniBand pod. */
export function h100Node(
  nodeId: string,
  opts: {
    pod?: string;
    running?: RunningInit[];
    usedGib?: number[];
    gpuProblems?: Record<number, string[]>;
  } = {},
): RegisterInit {
  return registrationOf(nodeId, h100Hardware(nodeId, { memoryMb: 80 * GIB, pod: opts.pod ?? "ib-pod-1" }), {
    agentVersion: "1.8.2",
    usedMb: (opts.usedGib ?? []).map((g) => g * GIB),
    ...(opts.gpuProblems ? { problems: opts.gpuProblems } : {}),
    runningShards: runningShards(opts.running),
    labels: { zone: "eu-west-1a", pool: "general", pod: opts.pod ?? "ib-pod-1" },
  });
}

/** The catalog of the fleet facts: Llama 3.3 70B on 4 GPUs, Llama 3.1 405B on two 8-GPU nodes. */
export function llamaCatalog(replicas70b = 2, replicas405b = 1): ModelInit[] {
  return [
    {
      name: "llama-3.3-70b",
      replicas: replicas70b,
      profiles: [
        {
          name: "tp4",
          shards: 1,
          gpusPerShard: 4,
          memoryPerGpuMb: BigInt(72 * GIB),
          gpuProduct: "H100",
          engineArgs: ["--tensor-parallel-size", "4", "--max-model-len", "32768"],
          engineEnv: { VLLM_USE_V1: "1" },
        },
      ],
    },
    {
      name: "llama-3.1-405b",
      replicas: replicas405b,
      profiles: [
        {
          name: "tp8-pp2",
          shards: 2,
          gpusPerShard: 8,
          memoryPerGpuMb: BigInt(76 * GIB),
          gpuProduct: "H100",
          fabricKind: "infiniband",
          engineArgs: ["--tensor-parallel-size", "8", "--pipeline-parallel-size", "2"],
          engineEnv: { NCCL_IB_HCA: "mlx5", VLLM_USE_V1: "1" },
        },
      ],
    },
  ];
}

const GATEWAY = Writer_Kind.GATEWAY;

/** Makes events with deterministic ids (`<prefix>-<n>`) and writer times (t0 + n s). */
export class EventFactory {
  #n = 0;
  constructor(
    readonly prefix = "evt",
    readonly t0 = 1_780_000_000_000,
  ) {}

  get count(): number {
    return this.#n;
  }
  nowMs(): number {
    return this.t0 + this.#n * 1000;
  }

  make(body: EventInit["body"], writer: { kind: Writer_Kind; id: string } = { kind: GATEWAY, id: "gw-1" }) {
    const n = this.#n++;
    return create(EventSchema, {
      id: `${this.prefix}-${n}`,
      timeUnixMs: BigInt(this.t0 + n * 1000),
      writer,
      body,
    });
  }

  gatewayStarted(gatewayId: string): Event {
    return this.make(
      {
        case: "gatewayStarted",
        value: { gatewayId, listenAddress: "0.0.0.0:8443", version: "0.1.0", leaseTtlMs: 10_000 },
      },
      { kind: GATEWAY, id: gatewayId },
    );
  }
  gatewayDraining(gatewayId: string, openSessions = 0): Event {
    return this.make(
      {
        case: "gatewayDraining",
        value: { gatewayId, deadlineUnixMs: BigInt(this.nowMs() + 30_000), openSessions },
      },
      { kind: GATEWAY, id: gatewayId },
    );
  }
  gatewayStopped(gatewayId: string, reason = "SIGTERM"): Event {
    return this.make(
      { case: "gatewayStopped", value: { gatewayId, reason } },
      { kind: GATEWAY, id: gatewayId },
    );
  }

  catalog(models: ModelInit[], appliedBy = "ops"): Event {
    return this.make(
      { case: "catalogChanged", value: { appliedBy, catalog: { models } } },
      { kind: Writer_Kind.OPERATOR, id: "api-1" },
    );
  }

  sessionOpened(nodeId: string, sessionId: string, gatewayId: string, registration?: RegisterInit): Event {
    return this.make(
      {
        case: "sessionOpened",
        value: {
          nodeId,
          sessionId,
          gatewayId,
          identity: "mtls",
          registration: registration ?? h100Node(nodeId),
        },
      },
      { kind: GATEWAY, id: gatewayId },
    );
  }
  sessionClosed(
    nodeId: string,
    sessionId: string,
    gatewayId: string,
    reason = SessionClosed_Reason.DISCONNECTED,
  ): Event {
    return this.make(
      { case: "sessionClosed", value: { nodeId, sessionId, gatewayId, reason, detail: "test" } },
      { kind: GATEWAY, id: gatewayId },
    );
  }
  hardwareChanged(nodeId: string, sessionId: string, registration: RegisterInit, sessionSeq = 2n): Event {
    return this.make({ case: "hardwareChanged", value: { nodeId, sessionId, sessionSeq, registration } });
  }
  usage(nodeId: string, sessionId: string, usedGib: number[], newProblems: string[] = [], sessionSeq = 3n) {
    return this.make({
      case: "usageChanged",
      value: {
        nodeId,
        sessionId,
        sessionSeq,
        gpuMemoryUsedMb: usedGib.map((g) => BigInt(g * GIB)),
        newProblems,
      },
    });
  }
  shardStatus(
    nodeId: string,
    sessionId: string,
    replicaId: string,
    shardId: string,
    state: ShardStatus_State,
    failure?: { error: string; exitCode: number },
    sessionSeq = 4n,
  ): Event {
    return this.make({
      case: "shardStatus",
      value: {
        nodeId,
        sessionId,
        sessionSeq,
        status: { replicaId, shardId, state, error: failure?.error ?? "", exitCode: failure?.exitCode ?? 0 },
      },
    });
  }
  commandResult(
    nodeId: string,
    sessionId: string,
    commandId: string,
    ok = true,
    error = "",
    sessionSeq = 5n,
  ) {
    return this.make({
      case: "commandResult",
      value: { nodeId, sessionId, sessionSeq, result: { commandId, ok, error } },
    });
  }

  cordon(nodeId: string, reason = "maintenance"): Event {
    return this.make(
      { case: "nodeCordoned", value: { nodeId, reason, operator: "alice" } },
      { kind: Writer_Kind.OPERATOR, id: "api-1" },
    );
  }
  uncordon(nodeId: string): Event {
    return this.make(
      { case: "nodeUncordoned", value: { nodeId, operator: "alice" } },
      { kind: Writer_Kind.OPERATOR, id: "api-1" },
    );
  }
  drain(nodeId: string, reason = "RMA"): Event {
    return this.make(
      { case: "nodeDrainRequested", value: { nodeId, reason, operator: "bob" } },
      { kind: Writer_Kind.OPERATOR, id: "api-1" },
    );
  }

  pass(decisions: DecisionInit[], commands: CommandInit[] = [], observedSeq = 0): Event {
    return this.make(
      {
        case: "reconcilePass",
        value: {
          leaderId: "rec-1",
          leaseRevision: 3n,
          observedSeq: BigInt(observedSeq),
          nowUnixMs: BigInt(this.nowMs()),
          trigger: "events",
          decisions,
          commands,
        },
      },
      { kind: Writer_Kind.RECONCILER, id: "rec-1" },
    );
  }
}

// ------------------------------------------------------------ decisions

export interface PlacementInit {
  shard: string;
  node: string;
  session: string;
  gpus: number[];
  rank?: number;
}

export const decide = {
  created(replicaId: string, model: string, replaces = ""): DecisionInit {
    return {
      explanation: `${model} wants another replica`,
      kind: { case: "replicaCreated", value: { replicaId, model, replaces } },
    };
  },
  placed(replicaId: string, model: string, profile: string, shards: PlacementInit[]): DecisionInit {
    const nodes = shards.map((s) => s.node);
    return {
      explanation: `placed ${replicaId} on ${nodes.join("+")} (binpack)`,
      kind: {
        case: "replicaPlaced",
        value: {
          replicaId,
          model,
          profile,
          policy: "binpack",
          shards: shards.map((s, i) => ({
            shardId: s.shard,
            rank: s.rank ?? i,
            nodeId: s.node,
            sessionId: s.session,
            gpuIndices: s.gpus,
          })),
          chosen: { nodeIds: nodes, score: 0.75 },
          runnersUp: [],
        },
      },
    };
  },
  pending(replicaId: string, model: string, explanation: string): DecisionInit {
    return {
      explanation,
      kind: {
        case: "replicaPending",
        value: {
          replicaId,
          model,
          nodesConsidered: 3,
          nodesFit: 0,
          ruledOut: [{ reason: "cordoned", nodes: 3 }],
        },
      },
    };
  },
  adopted(
    nodeId: string,
    sessionId: string,
    shards: Array<{
      shard: string;
      replica: string;
      model: string;
      profile: string;
      gpus: number[];
      rank?: number;
    }>,
  ): DecisionInit {
    return {
      explanation: `adopted ${shards.length} running shard(s) on ${nodeId}`,
      kind: {
        case: "shardsAdopted",
        value: {
          nodeId,
          sessionId,
          shards: shards.map((s) => ({
            shardId: s.shard,
            replicaId: s.replica,
            model: s.model,
            profile: s.profile,
            gpuIndices: s.gpus,
            rank: s.rank ?? 0,
          })),
        },
      },
    };
  },
  unclaimed(
    nodeId: string,
    sessionId: string,
    shardId: string,
    replicaId: string,
    model: string,
  ): DecisionInit {
    return {
      explanation: `nothing in the catalog claims ${shardId}`,
      kind: {
        case: "shardUnclaimed",
        value: { nodeId, sessionId, shardId, replicaId, model, reason: "no model" },
      },
    };
  },
  liveness(nodeId: string, liveness: Liveness, sessionId: string, sinceMs = 0): DecisionInit {
    return {
      explanation: `${nodeId} is ${Liveness[liveness].toLowerCase()}`,
      kind: {
        case: "nodeLiveness",
        value: { nodeId, liveness, sessionId, disconnectedSinceUnixMs: BigInt(sinceMs) },
      },
    };
  },
  sessionsExpired(gatewayId: string, sessions: Array<{ node: string; session: string }>): DecisionInit {
    return {
      explanation: `gateway ${gatewayId} lease expired`,
      kind: {
        case: "sessionsExpired",
        value: { gatewayId, sessions: sessions.map((s) => ({ nodeId: s.node, sessionId: s.session })) },
      },
    };
  },
  removed(replicaId: string, model: string, reason = "scaled down"): DecisionInit {
    return { explanation: reason, kind: { case: "replicaRemoved", value: { replicaId, model, reason } } };
  },
  drainStarted(replicaId: string, replacementId: string, reason = "node draining"): DecisionInit {
    return {
      explanation: reason,
      kind: { case: "replicaDrainStarted", value: { replicaId, replacementId, reason } },
    };
  },
  reissued(commandId: string, attempt: number, nextMs: number): DecisionInit {
    return {
      explanation: `${commandId} had no result in time`,
      kind: { case: "commandReissued", value: { commandId, attempt, nextRetryUnixMs: BigInt(nextMs) } },
    };
  },
  cooldown(model: string, nodeId: string, failures: number, untilMs: number): DecisionInit {
    return {
      explanation: `${model} failed ${failures} times on ${nodeId}`,
      kind: { case: "cooldownStarted", value: { model, nodeId, failures, untilUnixMs: BigInt(untilMs) } },
    };
  },
  backoff(replicaId: string, restarts: number, untilMs: number): DecisionInit {
    return {
      explanation: `${replicaId} crash-loops`,
      kind: { case: "shardBackoff", value: { replicaId, restarts, untilUnixMs: BigInt(untilMs) } },
    };
  },
  failed(replicaId: string, shardId: string, nodeId: string, error: string): DecisionInit {
    return {
      explanation: `${shardId} failed on ${nodeId}: ${error}`,
      kind: { case: "replicaFailed", value: { replicaId, shardId, nodeId, error } },
    };
  },
  duplicateStopped(nodeId: string, shardId: string, replicaId: string): DecisionInit {
    return {
      explanation: `${replicaId} already runs elsewhere`,
      kind: { case: "duplicateStopped", value: { nodeId, shardId, replicaId } },
    };
  },
};

// ------------------------------------------------------------- commands

export const command = {
  start(
    commandId: string,
    nodeId: string,
    sessionId: string,
    s: {
      shard: string;
      replica: string;
      model: string;
      profile: string;
      gpus: number[];
      rank?: number;
      peers?: string[];
    },
    deadlineMs = 1_780_000_600_000,
  ): CommandInit {
    return {
      commandId,
      nodeId,
      sessionId,
      attempt: 1,
      deadlineUnixMs: BigInt(deadlineMs),
      action: {
        case: "start",
        value: {
          commandId,
          shardId: s.shard,
          replicaId: s.replica,
          model: s.model,
          profile: s.profile,
          gpuIndices: s.gpus,
          rank: s.rank ?? 0,
          worldSize: s.peers?.length ?? 1,
          peers: s.peers ?? [],
        },
      },
    };
  },
  stop(
    commandId: string,
    nodeId: string,
    sessionId: string,
    shardId: string,
    deadlineMs = 1_780_000_600_000,
  ) {
    return shardCommand(commandId, nodeId, sessionId, deadlineMs, {
      case: "stop",
      value: { commandId, shardId },
    });
  },
  drain(
    commandId: string,
    nodeId: string,
    sessionId: string,
    shardId: string,
    deadlineMs = 1_780_000_600_000,
  ) {
    return shardCommand(commandId, nodeId, sessionId, deadlineMs, {
      case: "drain",
      value: { commandId, shardId, deadlineUnixMs: BigInt(deadlineMs) },
    });
  },
};

/** A first attempt of a stop or drain command. */
function shardCommand(
  commandId: string,
  nodeId: string,
  sessionId: string,
  deadlineMs: number,
  action: CommandInit["action"],
): CommandInit {
  return { commandId, nodeId, sessionId, attempt: 1, deadlineUnixMs: BigInt(deadlineMs), action };
}

/** A reconcile pass as a test leader ("rec-test") writes it, stamped now, with the id given. */
export function testPass(
  id: string,
  pass: { trigger?: string; decisions?: DecisionInit[]; commands?: CommandInit[] },
): Event {
  return create(EventSchema, {
    id,
    timeUnixMs: BigInt(Date.now()),
    writer: { kind: Writer_Kind.RECONCILER, id: "rec-test" },
    body: { case: "reconcilePass", value: { leaderId: "rec-test", ...pass } },
  });
}

/** A node cordoned by a test tool ("test"), stamped now, with the id given: for tests of the log that choose their ids. */
export function testCordon(id: string, nodeId = "gpu-a1"): Event {
  return create(EventSchema, {
    id,
    timeUnixMs: BigInt(Date.now()),
    writer: { kind: Writer_Kind.TOOL, id: "test" },
    body: { case: "nodeCordoned", value: { nodeId, reason: "test", operator: "t" } },
  });
}
