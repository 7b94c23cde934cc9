/**
 * The one builder of a node's registration: the simulator's agents, the
 * tests' fleets and the benchmarks' agents all register through it, so a
 * field added to Register is filled in one place.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { RegisterSchema } from "../gen/llmgw/v1/agent_pb.js";
import { H100, type NodeHardware, nodeHardware } from "./hardware.js";

export type RegisterInit = MessageInitShape<typeof RegisterSchema>;
export type RunningShardInit = NonNullable<RegisterInit["runningShards"]>[number];

/** What a node says about itself besides its hardware. */
export interface RegistrationState {
  agentVersion: string;
  /** Memory in use per GPU index, MB (engines and foreign processes). */
  usedMb?: readonly number[];
  /** Problems per GPU index. */
  problems?: Readonly<Record<number, readonly string[]>>;
  /** Empty means "running nothing", and is sent as such. */
  runningShards?: RunningShardInit[];
  labels?: Record<string, string>;
  cumulativeAcks?: boolean;
  /** Register.advertise_address; "" (the default) leaves the node id to stand in. */
  advertiseAddress?: string;
}

// The return type is the literal's (not RegisterInit, a union with the message type) so callers can spread it and override a field.
export function registrationOf(nodeId: string, hw: NodeHardware, s: RegistrationState) {
  return {
    nodeId,
    agentVersion: s.agentVersion,
    gpus: hw.gpus.map((g) => ({
      index: g.index,
      uuid: g.uuid,
      product: g.product,
      memoryTotalMb: BigInt(g.memoryTotalMb),
      memoryUsedMb: BigInt(s.usedMb?.[g.index] ?? 0),
      problems: [...(s.problems?.[g.index] ?? [])],
    })),
    fabrics: hw.fabrics.map((f) => ({ ...f, gpuIndices: [...f.gpuIndices] })),
    runningShards: s.runningShards ?? [],
    labels: { ...s.labels },
    cumulativeAcks: s.cumulativeAcks ?? false,
    advertiseAddress: s.advertiseAddress ?? "",
  };
}

export interface H100NodeSpec {
  /** GPUs in the node (default 8), one NVLink domain over all of them. */
  gpus?: number;
  product?: string;
  memoryMb?: number;
  /** The InfiniBand pod the node is on, or none. */
  pod?: string | null;
}

/** An HGX H100 node: its GPUs on one NVLink domain, every GPU on the named InfiniBand pod. */
export function h100Hardware(nodeId: string, spec: H100NodeSpec = {}): NodeHardware {
  const gpusPerNode = spec.gpus ?? 8;
  const hw = nodeHardware(nodeId, 0, {
    gpusPerNode,
    gpuProduct: spec.product ?? H100.product,
    gpuMemoryMb: spec.memoryMb ?? H100.memoryMb,
    nodesPerFabric: 0,
    fabricKind: "infiniband",
    nvlinkDomainSize: gpusPerNode,
  });
  if (spec.pod) {
    hw.fabrics.push({ name: spec.pod, kind: "infiniband", gpuIndices: hw.gpus.map((g) => g.index) });
  }
  return hw;
}
