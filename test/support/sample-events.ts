/**
 * One realistic sample of every event kind (figures from the fleet facts:
 * H100 80 GB nodes, NVLink inside a node, InfiniBand pods between nodes).
 */
import { create } from "@bufbuild/protobuf";
import type { EventInit } from "../../src/codec/index.js";
import { GpuProblem_Kind, ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import {
  CommandUndeliverable_Action,
  CommandUndeliverable_Reason,
  type Event,
  EventSchema,
  Liveness,
  SessionClosed_Reason,
  Writer_Kind,
} from "../../src/gen/llmgw/v1/events_pb.js";
import { h100Hardware, registrationOf } from "../../src/sim/index.js";

const gib = 1024;

export function h100Registration(
  nodeId: string,
  running: Array<{ shard: string; replica: string; gpus: number[] }> = [],
) {
  return registrationOf(nodeId, h100Hardware(nodeId, { memoryMb: 80 * gib, pod: "ib-pod-1" }), {
    agentVersion: "1.8.2",
    runningShards: running.map((r) => ({
      shardId: r.shard,
      replicaId: r.replica,
      model: "llama-3.3-70b",
      profile: "tp4",
      gpuIndices: r.gpus,
      state: ShardStatus_State.RUNNING,
    })),
    labels: { zone: "eu-west-1a", pool: "general" },
  });
}

const writer = { kind: Writer_Kind.GATEWAY, id: "gw-1" };
const t0 = 1_780_000_000_000;

/** Builds one event of each kind, in a plausible order. */
export function sampleEvents(): Event[] {
  const mk = (i: number, body: EventInit["body"], kind = writer) =>
    create(EventSchema, { id: `sample-${i}`, timeUnixMs: BigInt(t0 + i * 1000), writer: kind, body });
  const reg = h100Registration("gpu-a1", [{ shard: "r1.0.g1", replica: "r1", gpus: [0, 1, 2, 3] }]);
  return [
    mk(0, {
      case: "gatewayStarted",
      value: { gatewayId: "gw-1", listenAddress: "0.0.0.0:8443", version: "0.1.0", leaseTtlMs: 10_000 },
    }),
    mk(
      1,
      {
        case: "catalogChanged",
        value: {
          appliedBy: "ops",
          catalog: {
            models: [
              {
                name: "llama-3.3-70b",
                replicas: 2,
                profiles: [
                  {
                    name: "tp4",
                    shards: 1,
                    gpusPerShard: 4,
                    memoryPerGpuMb: BigInt(72 * gib),
                    gpuProduct: "H100",
                    engineArgs: ["--tensor-parallel-size", "4"],
                    engineEnv: { VLLM_USE_V1: "1" },
                  },
                ],
              },
            ],
          },
        },
      },
      { kind: Writer_Kind.OPERATOR, id: "api-1" },
    ),
    mk(2, {
      case: "sessionOpened",
      value: { nodeId: "gpu-a1", sessionId: "s-1", gatewayId: "gw-1", registration: reg, identity: "mtls" },
    }),
    mk(3, {
      case: "hardwareChanged",
      value: { nodeId: "gpu-a1", sessionId: "s-1", sessionSeq: 2n, registration: reg },
    }),
    mk(4, {
      case: "usageChanged",
      value: {
        nodeId: "gpu-a1",
        sessionId: "s-1",
        sessionSeq: 3n,
        gpuMemoryUsedMb: [72n * 1024n, 72n * 1024n, 72n * 1024n, 72n * 1024n, 0n, 0n, 0n, 0n],
        newProblems: [],
        gpuProblems: [{ gpuIndex: 6, kind: GpuProblem_Kind.ECC, message: "uncorrectable ECC errors" }],
      },
    }),
    mk(5, {
      case: "shardStatus",
      value: {
        nodeId: "gpu-a1",
        sessionId: "s-1",
        sessionSeq: 4n,
        status: { replicaId: "r1", shardId: "r1.0.g1", state: ShardStatus_State.RUNNING },
      },
    }),
    mk(6, {
      case: "commandResult",
      value: { nodeId: "gpu-a1", sessionId: "s-1", sessionSeq: 5n, result: { commandId: "c-1", ok: true } },
    }),
    mk(
      7,
      { case: "nodeCordoned", value: { nodeId: "gpu-a1", reason: "firmware update", operator: "alice" } },
      { kind: Writer_Kind.OPERATOR, id: "api-1" },
    ),
    mk(
      8,
      { case: "nodeUncordoned", value: { nodeId: "gpu-a1", operator: "alice" } },
      { kind: Writer_Kind.OPERATOR, id: "api-1" },
    ),
    mk(
      9,
      { case: "nodeDrainRequested", value: { nodeId: "gpu-a1", reason: "RMA", operator: "bob" } },
      { kind: Writer_Kind.OPERATOR, id: "api-1" },
    ),
    mk(
      10,
      {
        case: "reconcilePass",
        value: {
          leaderId: "rec-1",
          leaseRevision: 7n,
          observedSeq: 9n,
          nowUnixMs: BigInt(t0 + 10_000),
          trigger: "events",
          decisions: [
            {
              explanation: "placed r2 on gpu-a2 (score 0.50); runners-up gpu-a3 (0.50)",
              kind: {
                case: "replicaPlaced",
                value: {
                  replicaId: "r2",
                  model: "llama-3.3-70b",
                  profile: "tp4",
                  policy: "binpack",
                  revision: "5f0e3a1c",
                  shards: [
                    {
                      shardId: "r2.0.g1",
                      rank: 0,
                      nodeId: "gpu-a2",
                      sessionId: "s-2",
                      gpuIndices: [0, 1, 2, 3],
                    },
                  ],
                  chosen: { nodeIds: ["gpu-a2"], score: 0.5 },
                  runnersUp: [{ nodeIds: ["gpu-a3"], score: 0.5 }],
                },
              },
            },
            {
              explanation: "0/3 nodes fit: 2 too few healthy GPUs, 1 cordoned",
              kind: {
                case: "replicaPending",
                value: {
                  replicaId: "r3",
                  model: "llama-3.3-70b",
                  nodesConsidered: 3,
                  nodesFit: 0,
                  ruledOut: [
                    { reason: "too few healthy GPUs", nodes: 2 },
                    { reason: "cordoned", nodes: 1 },
                  ],
                },
              },
            },
            {
              explanation: "gpu-a4 silent for 30s",
              kind: {
                case: "nodeLiveness",
                value: {
                  nodeId: "gpu-a4",
                  liveness: Liveness.SUSPECT,
                  sessionId: "s-4",
                  disconnectedSinceUnixMs: BigInt(t0),
                },
              },
            },
          ],
          commands: [
            {
              commandId: "c-2",
              nodeId: "gpu-a2",
              sessionId: "s-2",
              attempt: 1,
              deadlineUnixMs: BigInt(t0 + 70_000),
              action: {
                case: "start",
                value: {
                  commandId: "c-2",
                  shardId: "r2.0.g1",
                  replicaId: "r2",
                  model: "llama-3.3-70b",
                  profile: "tp4",
                  gpuIndices: [0, 1, 2, 3],
                  worldSize: 1,
                },
              },
            },
          ],
        },
      },
      { kind: Writer_Kind.RECONCILER, id: "rec-1" },
    ),
    mk(11, {
      case: "sessionClosed",
      value: {
        nodeId: "gpu-a1",
        sessionId: "s-1",
        gatewayId: "gw-1",
        reason: SessionClosed_Reason.DISCONNECTED,
        detail: "stream ended",
      },
    }),
    mk(12, {
      case: "gatewayDraining",
      value: { gatewayId: "gw-1", deadlineUnixMs: BigInt(t0 + 30_000), openSessions: 0 },
    }),
    mk(13, { case: "gatewayStopped", value: { gatewayId: "gw-1", reason: "SIGTERM" } }),
    mk(14, {
      case: "commandUndeliverable",
      value: {
        commandId: "c-30-2",
        attempt: 1,
        nodeId: "gpu-a1",
        sessionId: "9f6c2d1e-0b7a-4f8e-9a51-3c2d7e1f0a42",
        gatewayId: "gw-1",
        reason: CommandUndeliverable_Reason.SESSION_CLOSED,
        detail:
          "session 9f6c2d1e-0b7a-4f8e-9a51-3c2d7e1f0a42 of gpu-a1 ended on gateway gw-1: the connection ended",
        action: CommandUndeliverable_Action.STOP,
        shardId: "llama-3.3-70b-9-1-s0-9",
        replicaId: "llama-3.3-70b-9-1",
        passSeq: 30n,
      },
    }),
    mk(
      15,
      { case: "gpuCordoned", value: { nodeId: "gpu-a1", gpuIndex: 6, reason: "ECC", operator: "alice" } },
      { kind: Writer_Kind.OPERATOR, id: "api-1" },
    ),
    mk(
      16,
      {
        case: "gpuProblemsCleared",
        value: { nodeId: "gpu-a1", gpuIndex: 6, operator: "alice", reason: "reseated", nodeLevel: false },
      },
      { kind: Writer_Kind.OPERATOR, id: "api-1" },
    ),
    mk(
      17,
      { case: "gpuUncordoned", value: { nodeId: "gpu-a1", gpuIndex: 6, operator: "alice" } },
      { kind: Writer_Kind.OPERATOR, id: "api-1" },
    ),
    mk(18, {
      case: "duplicateIdentity",
      value: {
        nodeId: "gpu-a1",
        gatewayId: "gw-1",
        heldSessionId: "s-2",
        heldGatewayId: "gw-1",
        heldRemoteAddress: "10.0.0.5:50312",
        newcomerRemoteAddress: "10.0.0.9:41022",
        heldInstanceId: "5b0c1f1e-2f8a-4a6e-9d2b-0c7e3f9a1d44",
        newcomerInstanceId: "e3a9d0c2-7b1f-4c8e-8f5a-2d6b9e0c4a17",
        retryAfterMs: 5_000,
        attempts: 1,
        detail: "node gpu-a1 has a live session held by another agent process",
      },
    }),
    mk(
      19,
      {
        case: "rolloutPaused",
        value: { model: "llama-3.3-70b", operator: "alice", reason: "watch latency" },
      },
      { kind: Writer_Kind.OPERATOR, id: "api-1" },
    ),
    mk(
      20,
      { case: "rolloutResumed", value: { model: "llama-3.3-70b", operator: "alice" } },
      { kind: Writer_Kind.OPERATOR, id: "api-1" },
    ),
  ];
}
