/**
 * Conversions from decoded protobuf messages to the projection's plain data.
 * int64 fields arrive as bigint; the state holds numbers (MiB and ms fit
 * easily in a double).
 */
import type { Fabric, Gpu, GpuProblem, RunningShard } from "../gen/llmgw/v1/agent_pb.js";
import { GpuProblem_Kind, ShardStatus_State } from "../gen/llmgw/v1/agent_pb.js";
import type { Autoscale, Model, Profile, RolloutPolicy } from "../gen/llmgw/v1/events_pb.js";
import { modelRevision, profileRevision } from "./revision.js";
import type {
  AutoscaleSpec,
  FabricState,
  GpuFault,
  GpuFaultKind,
  GpuState,
  ModelSpec,
  ProfileSpec,
  RegisteredShard,
  ShardReportedState,
} from "./state.js";
import { DEFAULT_ENGINE, DEFAULT_ROLLOUT_POLICY, type RolloutPolicySpec } from "./state.js";

export function gpuFrom(g: Gpu): GpuState {
  return {
    index: g.index,
    uuid: g.uuid,
    product: g.product,
    memoryTotalMb: Number(g.memoryTotalMb),
    memoryUsedMb: Number(g.memoryUsedMb),
    problems: [...g.problems],
    faults: [],
    cordoned: false,
    cordonReason: "",
  };
}

/** A GPU problem in one line for people: "GPU 3 xid: Xid 79: ...". */
export function gpuProblemLine(p: GpuProblem): string {
  const f = gpuFaultFrom(p);
  return `GPU ${p.gpuIndex} ${f.kind}: ${f.message}`;
}

export function gpuFaultFrom(p: GpuProblem): GpuFault {
  return { kind: gpuFaultKind(p.kind), message: p.message };
}

function gpuFaultKind(k: GpuProblem_Kind): GpuFaultKind {
  switch (k) {
    case GpuProblem_Kind.XID:
      return "xid";
    case GpuProblem_Kind.ECC:
      return "ecc";
    case GpuProblem_Kind.THERMAL:
      return "thermal";
    case GpuProblem_Kind.RETIRED_PAGES:
      return "retired-pages";
    case GpuProblem_Kind.OTHER:
      return "other";
    default:
      // UNSPECIFIED, or a kind a newer agent knows: a problem all the same.
      return "unspecified";
  }
}

export function fabricFrom(f: Fabric): FabricState {
  return { name: f.name, kind: f.kind, gpuIndices: [...f.gpuIndices] };
}

export function shardStateName(s: ShardStatus_State): ShardReportedState {
  switch (s) {
    case ShardStatus_State.UNSPECIFIED:
      return "unspecified";
    case ShardStatus_State.STARTING:
      return "starting";
    case ShardStatus_State.RUNNING:
      return "running";
    case ShardStatus_State.DRAINING:
      return "draining";
    case ShardStatus_State.STOPPED:
      return "stopped";
    case ShardStatus_State.FAILED:
      return "failed";
    default:
      // A state added by a newer agent: known to be something, not what.
      return "unspecified";
  }
}

export function registeredShardFrom(r: RunningShard): RegisteredShard {
  return {
    shardId: r.shardId,
    replicaId: r.replicaId,
    model: r.model,
    profile: r.profile,
    gpuIndices: [...r.gpuIndices],
    state: shardStateName(r.state),
    endpoint: r.endpoint,
  };
}

/** Sorted copy of a string map, so serialized state does not depend on map order in the message. */
export function sortedRecord(m: { [k: string]: string }): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of Object.keys(m).sort()) out[k] = m[k] as string;
  return out;
}

export function profileFrom(p: Profile): ProfileSpec {
  const spec: Omit<ProfileSpec, "revision"> = {
    name: p.name,
    shards: p.shards,
    gpusPerShard: p.gpusPerShard,
    memoryPerGpuMb: Number(p.memoryPerGpuMb),
    gpuProduct: p.gpuProduct,
    fabricKind: p.fabricKind,
    nodeLabels: sortedRecord(p.nodeLabels),
    // Catalogs written before profiles named an engine mean the default one.
    engine: p.engine === "" ? DEFAULT_ENGINE : p.engine,
    engineArgs: [...p.engineArgs],
    engineEnv: sortedRecord(p.engineEnv),
    startTimeoutMs: p.startTimeoutMs,
    readyTimeoutMs: p.readyTimeoutMs,
    startAttempts: p.startAttempts,
  };
  return { ...spec, revision: profileRevision(spec) };
}

function rolloutFrom(r: RolloutPolicy | undefined): RolloutPolicySpec {
  const d = DEFAULT_ROLLOUT_POLICY;
  return {
    maxSurge: r?.maxSurge ?? d.maxSurge,
    maxUnavailable: r?.maxUnavailable ?? d.maxUnavailable,
    progressDeadlineMs: r?.progressDeadlineMs || d.progressDeadlineMs,
  };
}

export function modelFrom(m: Model): ModelSpec {
  const profiles = m.profiles.map(profileFrom);
  const spec: ModelSpec = {
    name: m.name,
    replicas: m.replicas,
    profiles,
    revision: modelRevision(profiles),
    rollout: rolloutFrom(m.rollout),
  };
  // Only when set, so the state of a catalog without a budget stays as it was.
  if (m.minAvailable !== "") spec.minAvailable = m.minAvailable;
  if (m.autoscale) spec.autoscale = autoscaleFrom(m.autoscale);
  return spec;
}

/** Autoscale defaults: what 0 in the message means. */
export const AUTOSCALE_DEFAULTS = Object.freeze({
  tolerance: 0.1,
  upCooldownMs: 30_000,
  downCooldownMs: 120_000,
  stabilizationMs: 15_000,
});

export function autoscaleFrom(a: Autoscale): AutoscaleSpec {
  return {
    min: a.min,
    max: a.max,
    metric: a.metric,
    target: a.target,
    tolerance: a.tolerance > 0 ? a.tolerance : AUTOSCALE_DEFAULTS.tolerance,
    upCooldownMs: a.scaleUpCooldownMs > 0 ? a.scaleUpCooldownMs : AUTOSCALE_DEFAULTS.upCooldownMs,
    downCooldownMs: a.scaleDownCooldownMs > 0 ? a.scaleDownCooldownMs : AUTOSCALE_DEFAULTS.downCooldownMs,
    stabilizationMs: a.stabilizationMs > 0 ? a.stabilizationMs : AUTOSCALE_DEFAULTS.stabilizationMs,
  };
}
