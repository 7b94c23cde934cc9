/**
 * The API's answers as the UI reads them (a subset of the operator API's
 * views; docs/operator-api.md describes them in full).
 */

export type Liveness = "connected" | "disconnected" | "suspect" | "lost";

export interface ShardOnGpu {
  replicaId: string;
  shardId: string;
  model: string;
  state: string;
}

export interface Gpu {
  index: number;
  uuid: string;
  product: string;
  memoryTotalMb: number;
  memoryUsedMb: number;
  problems: string[];
  /** Problems heartbeats reported for this GPU (kind: xid, ecc, thermal, retired-pages, other). */
  faults: Array<{ kind: string; message: string }>;
  cordoned: boolean;
  cordonReason: string;
  shards: ShardOnGpu[];
}

export interface Fabric {
  name: string;
  kind: string;
  gpuIndices: number[];
}

export interface Node {
  nodeId: string;
  liveness: Liveness;
  labels: Record<string, string>;
  cordoned: boolean;
  cordonReason: string;
  draining: boolean;
  nodeProblems: string[];
  fabrics: Fabric[];
  gpus: Gpu[];
  gpusTotal: number;
  gpusUsed: number;
  replicaIds: string[];
}

export interface ReplicaShard {
  shardId: string;
  rank: number;
  nodeId: string;
  gpuIndices: number[];
  state: string;
  desired: string;
  lastError: string;
  exitCode: number;
  lastOutput: string;
  /** Where the engine serves ("" until a status names it). */
  endpoint: string;
}

export type Phase = "pending" | "placed" | "running" | "draining";

export interface Replica {
  replicaId: string;
  model: string;
  profile: string;
  phase: Phase;
  shards: ReplicaShard[];
  pendingReason: string;
  replaces: string;
  replacedBy: string;
  nodeIds: string[];
  /** Every shard RUNNING, none draining or stopping: counts as capacity. */
  ready: boolean;
  lastFailure: {
    reason: string;
    message: string;
    nodeId: string;
    shardId: string;
    exitCode: number;
    lastOutput: string;
    seq: number;
  } | null;
}

export interface ModelReadiness {
  model: string;
  ready: number;
  desired: number;
}

export interface Fleet {
  seq: number;
  timeMs: number;
  lastSeq: number;
  nodes: Node[];
  replicas: Replica[];
  catalog: { seq: number; models: string[] };
  readiness: ModelReadiness[];
}

export interface EventRow {
  seq: number;
  timeMs: number;
  subject: string;
  kind?: string;
  text?: string;
  nodeIds?: string[];
  replicaIds?: string[];
  malformed?: string;
}

export interface Candidate {
  nodeIds: string[];
  score: number;
}

export interface Explain {
  seq: number;
  replicaId: string;
  replica: Replica | null;
  decisions: Array<{ seq: number; timeMs: number; kind: string; text: string }>;
  placement: {
    seq: number;
    profile: string;
    policy: string;
    chosen: Candidate | null;
    runnersUp: Candidate[];
    explanation: string;
  } | null;
  pending: {
    seq: number;
    nodesConsidered: number;
    nodesFit: number;
    ruledOut: Array<{ reason: string; nodes: number }>;
    explanation: string;
  } | null;
}

export interface HistoryEntry {
  seq: number;
  timeMs: number;
  kind: string;
  text: string;
  nodeId?: string;
}

export interface Difference {
  subject: string;
  record: string;
  alternative: string;
  nodes: string[];
}

export interface WhatIfResult {
  compared: number;
  differing: number;
  passes: Array<{ seq: number; nowMs: number; differences: Difference[] }>;
}
