/**
 * The projected state of the fleet: plain data only, so that it serializes
 * to JSON deterministically (same log → byte-identical state) and a snapshot
 * restores exactly. Records are keyed by id; their key order is the order in
 * which ids first appeared in the log, which is itself deterministic.
 *
 * The nodes and the replicas are `RecordTable`s (record-table.ts): the only
 * way to change one of their records, and whose JSON form is the plain
 * records object. Readers that must not write get a `FleetView`.
 */
import type { RecordTable, TableView } from "./record-table.js";

// ---------------------------------------------------------------- inventory

/** Liveness of a node. `suspect` and `lost` are decided by the reconciler, never by a clock. */
export type NodeLiveness = "connected" | "disconnected" | "suspect" | "lost";

export interface GpuState {
  index: number;
  uuid: string;
  product: string;
  memoryTotalMb: number;
  /** Memory in use by anything on the card (ours or foreign), MiB, as last reported. */
  memoryUsedMb: number;
  /** Health problems of this GPU as the agent registered them; any keeps it out of placement. */
  problems: string[];
  /** Problems heartbeats reported for this GPU since; any keeps it out of placement and moves its shards off. */
  faults: GpuFault[];
  /** An operator keeps new work off this GPU; what runs on it stays. */
  cordoned: boolean;
  cordonReason: string;
}

/** GpuProblem.Kind in lower case; "unspecified" also stands for a kind from a newer agent. */
export type GpuFaultKind = "unspecified" | "xid" | "ecc" | "thermal" | "retired-pages" | "other";

export interface GpuFault {
  kind: GpuFaultKind;
  message: string;
}

export interface FabricState {
  name: string;
  kind: string;
  gpuIndices: number[];
}

export interface SessionState {
  sessionId: string;
  gatewayId: string;
  /** Sequence of the session-opened event. */
  openedSeq: number;
  openedAtMs: number;
  /** "mtls" or "insecure-dev". */
  identity: string;
  /** Shards the node said it runs when this session opened (the adoption input). */
  registeredShards: RegisteredShard[];
  /**
   * Sequence of the pass whose ShardsAdopted decision handled this session's
   * registration (adopting, stopping or forgetting its shards); 0 until then.
   * Adoption runs once per session, before anything is placed on the node.
   */
  adoptionSeq: number;
}

export interface RegisteredShard {
  shardId: string;
  replicaId: string;
  model: string;
  profile: string;
  gpuIndices: number[];
  /** ShardStatus state name as the agent reported it: "running", "starting", ... */
  state: ShardReportedState;
  /** The URL the engine serves on, as registered; "" when unknown. */
  endpoint: string;
}

export interface NodeState {
  nodeId: string;
  agentVersion: string;
  /**
   * Where other nodes reach it (Register.advertise_address of its newest
   * registration); "" when it advertised none.
   */
  advertiseAddress: string;
  labels: Record<string, string>;
  gpus: GpuState[];
  fabrics: FabricState[];
  /**
   * Problems reported per node (heartbeats). Not attributable to one GPU, so
   * they keep every GPU of the node out of placement (the conservative
   * direction) until the node registers again with its own health view or
   * an operator clears them.
   */
  nodeProblems: string[];
  /** The current session, or null when the node has none open. */
  session: SessionState | null;
  /** The newest session ever opened for the node (current or closed). */
  lastSessionId: string;
  liveness: NodeLiveness;
  /** Since when the node has had no session (ms), or null while connected. */
  disconnectedSinceMs: number | null;
  /** Why the last session ended ("disconnected", "silent", "gateway-lost", ...); "" while connected. */
  lastCloseReason: string;
  cordoned: boolean;
  cordonReason: string;
  /** An operator asked to drain it: replicas move off (make-before-break); it stays cordoned. */
  draining: boolean;
  firstSeenSeq: number;
  /** Sequence of the last event that changed this node. */
  lastChangeSeq: number;
}

export type GatewayStatus = "running" | "draining" | "stopped" | "lost";

export interface GatewayState {
  gatewayId: string;
  status: GatewayStatus;
  listenAddress: string;
  version: string;
  leaseTtlMs: number;
  startedSeq: number;
  lastChangeSeq: number;
}

export interface InventoryState {
  readonly nodes: RecordTable<NodeState>;
  gateways: Record<string, GatewayState>;
}

// ----------------------------------------------------------------- replicas

/** The engine of a profile that names none (a catalog's Profile.engine empty). */
export const DEFAULT_ENGINE = "default";

export interface ProfileSpec {
  name: string;
  shards: number;
  gpusPerShard: number;
  memoryPerGpuMb: number;
  /** Substring of the GPU product name; "" = any. */
  gpuProduct: string;
  /** Fabric kind the shards' nodes must share; "" = none needed. */
  fabricKind: string;
  nodeLabels: Record<string, string>;
  /** The agent's engine the shards run with; "default" when the catalog named none. */
  engine: string;
  engineArgs: string[];
  engineEnv: Record<string, string>;
  /** Per-profile overrides of the reconciler's lifecycle deadlines; 0 = its default. */
  startTimeoutMs: number;
  readyTimeoutMs: number;
  startAttempts: number;
  /** The spec revision (revision.ts): a content hash of engine, arguments, environment and GPU needs. */
  revision: string;
}

/** How a spec change rolls a model (catalog `rollout`), defaults filled in. */
export interface RolloutPolicySpec {
  /** Replicas beyond `replicas` while rolling. */
  maxSurge: number;
  /** How many fewer than `replicas` may be ready while rolling. */
  maxUnavailable: number;
  /** A new replica not ready this long after its creation stalls the rollout. */
  progressDeadlineMs: number;
}

export const DEFAULT_ROLLOUT_POLICY: RolloutPolicySpec = Object.freeze({
  maxSurge: 1,
  maxUnavailable: 0,
  progressDeadlineMs: 10 * 60_000,
});

export interface ModelSpec {
  name: string;
  /** Fixed replicas; with autoscale, where the count starts. */
  replicas: number;
  /** In order of preference. */
  profiles: ProfileSpec[];
  /** The disruption budget as the catalog states it ("2" or "75%", see budget.ts); absent = none. */
  minAvailable?: string;
  /** The model's revision: its profiles' names and revisions, hashed. */
  revision: string;
  rollout: RolloutPolicySpec;
  /** Present only when the catalog sets it (a model without keeps the JSON it always had). */
  autoscale?: AutoscaleSpec;
}

/**
 * A model's rollout as the passes and operators recorded it: which
 * revision it goes to, whether it is stalled (and why) or paused.
 */
export interface RolloutState {
  model: string;
  /** The model revision of the last rollout started; "" when none ever started. */
  revision: string;
  /** Started and not yet completed. */
  active: boolean;
  /** Sequence of the pass that started it (0: none). */
  startedSeq: number;
  startedMs: number;
  /** Replicas on an older revision when it started. */
  outdatedAtStart: number;
  /** Why it does not progress, or null. */
  stalled: { replicaId: string; reason: string; seq: number } | null;
  /** Sequence of the pass that completed it (0: not completed). */
  completedSeq: number;
  /** An operator paused it: no replica is replaced until resumed. */
  paused: boolean;
  pausedBy: string;
  pauseReason: string;
}

/** What autoscaling averages over a model's ready replicas. */
export type AutoscaleMetric = "queue_depth" | "kv_cache_use";

export const AUTOSCALE_METRICS: readonly AutoscaleMetric[] = ["queue_depth", "kv_cache_use"];

/** A model's autoscale setting, defaults filled in (Autoscale in the catalog). */
export interface AutoscaleSpec {
  min: number;
  max: number;
  /** A metric this version does not know is kept as written; nothing scales on it. */
  metric: string;
  target: number;
  /** No decision while the value is within target·(1 ± tolerance). */
  tolerance: number;
  /** Time after the model's last scale decision before a scale-up / scale-down (ms). */
  upCooldownMs: number;
  downCooldownMs: number;
  /** The load must stay beyond the band this long before a decision (ms). */
  stabilizationMs: number;
}

/**
 * A model's autoscaling as the passes decided it: the replica count the last
 * AutoscaleDecided set (null: the catalog's `replicas`, also after a catalog
 * change of them) and when it last scaled each way (the decision time, ms).
 */
export interface AutoscaleState {
  replicas: number | null;
  lastUpMs: number;
  lastDownMs: number;
  /** Sequence of the pass of the last decision (0: none). */
  lastSeq: number;
  /** Its explanation, for operators. */
  lastExplanation: string;
}

/** One load report of a shard's engine (UsageChanged.shard_load). */
export interface LoadSample {
  /** Stream time of the event (ms). */
  atMs: number;
  queueDepth: number;
  /** 0..1 */
  kvCacheUse: number;
}

/**
 * A shard's recent load: its reports of the last few minutes, oldest first
 * (the newest is what it reports now; the one before the window is kept,
 * being what was in force at its start). Autoscaling reads a window of it.
 */
export interface ShardLoadState {
  samples: LoadSample[];
  /** Sequence of the event of the newest sample. */
  seq: number;
}

export interface CatalogState {
  models: ModelSpec[];
  /** Sequence of the catalog-changed event in force (0: none yet). Optimistic concurrency uses it. */
  seq: number;
  appliedBy: string;
}

/** ShardStatus states in lower case, plus "pending" for a placed shard with no report yet. */
export type ShardReportedState =
  | "pending"
  | "unspecified"
  | "starting"
  | "running"
  | "draining"
  | "stopped"
  | "failed";

/** What the reconciler wants of a shard. */
export type ShardDesired = "running" | "draining" | "stopped";

export interface ShardState {
  shardId: string;
  rank: number;
  nodeId: string;
  /** The session the shard was placed or adopted on; commands go to it. */
  sessionId: string;
  gpuIndices: number[];
  state: ShardReportedState;
  desired: ShardDesired;
  /** True when it was adopted from a registration rather than started by a pass. */
  adopted: boolean;
  lastError: string;
  exitCode: number;
  /** The URL the engine serves on, from the newest status (or registration) that named one; "" until then. */
  endpoint: string;
  /** The last lines the engine printed, as last reported. */
  lastOutput: string;
  /**
   * A fact that makes the shard unable to serve although it is wanted
   * running: the agent refused its start, or it stopped or failed on its own.
   * Recorded by the fold; the reconciler's next pass fails the replica.
   */
  fault: ShardFault | null;
  /** The start command this shard was placed with ("" for an adopted shard). */
  startCommandId: string;
  /** Sends of that start command so far. */
  startAttempts: number;
  /** STARTING is due by then (ms); 0 once it was reported (or for an adopted shard). */
  startDueMs: number;
  /** When the shard first reported STARTING (stream time, ms); 0 otherwise. The ready timeout counts from it. */
  startingSinceMs: number;
  /** Sequence of the last report or decision about this shard. */
  lastChangeSeq: number;
  /** The load its engine last reported; absent until it reports one. */
  load?: ShardLoadState;
}

/** Why a wanted shard cannot serve, as the fold saw it. */
export interface ShardFault {
  kind: "start-refused" | "failed" | "unrequested-stop";
  message: string;
}

/** Why a replica last failed, kept after its shards are gone so operators can see it. */
export interface ReplicaFailure {
  /** ReplicaFailed.Reason in lower-case words ("start-timeout", "ready-timeout", ...). */
  reason: string;
  message: string;
  nodeId: string;
  shardId: string;
  exitCode: number;
  lastOutput: string;
  /** Sequence of the pass that failed it. */
  seq: number;
}

/**
 * - pending: wanted, not placed (no fit, backoff or cooldown).
 * - placed: shards assigned and start commands sent; not all running yet.
 * - running: every shard reports running — the replica is ready: only these count as capacity.
 * - draining: being replaced or scaled down; shards drain then stop.
 */
export type ReplicaPhase = "pending" | "placed" | "running" | "draining";

export interface ReplicaState {
  replicaId: string;
  model: string;
  /** The profile it was placed with; "" while never placed. */
  profile: string;
  /**
   * The spec revision of that profile when it was placed; "" while never
   * placed. A replica adopted that the log did not know takes its profile's
   * revision in force at adoption (what it was started with is unknown).
   */
  revision: string;
  /** The decision time of the pass that created it (ms); the rollout's progress deadline counts from it. */
  createdMs: number;
  phase: ReplicaPhase;
  createdSeq: number;
  shards: ShardState[];
  /** The replica this one replaces (drain, lost node), or "". */
  replaces: string;
  /** The replica replacing this one, or "". */
  replacedBy: string;
  /** The explanation of the last pending decision, or "". */
  pendingReason: string;
  /** Why it is draining, or "". */
  drainReason: string;
  /** The decision time of the pass that started (or last restated) its drain (ms); 0 while not draining. The drain deadline counts from it. */
  drainStartedMs: number;
  /** Starts after failures (crash loops back off). */
  restarts: number;
  /** No new start before this time (ms); 0 = none. */
  backoffUntilMs: number;
  /** The last failure, or null when it never failed. */
  lastFailure: ReplicaFailure | null;
  lastChangeSeq: number;
  /**
   * While it must leave (node drain, GPU fault) but its model's disruption
   * budget keeps it serving: the explanation of the DisruptionBlocked
   * decision in force. Absent otherwise.
   */
  disruptionBlocked?: string;
}

export type CommandKind = "start" | "stop" | "drain";

export interface CommandState {
  commandId: string;
  kind: CommandKind;
  nodeId: string;
  sessionId: string;
  shardId: string;
  replicaId: string;
  attempt: number;
  issuedSeq: number;
  /** A result is expected by then (ms). */
  deadlineMs: number;
}

/** Why a gateway could not deliver a command (CommandUndeliverable.Reason). */
export type UndeliverableReason = "session-closed" | "session-closing" | "queue-full" | "unspecified";

/**
 * A command the gateway holding its session could not deliver, kept until a
 * reconcile pass handles it (an UndeliverableHandled decision removes it).
 */
export interface UndeliverableState {
  commandId: string;
  attempt: number;
  kind: CommandKind;
  nodeId: string;
  sessionId: string;
  gatewayId: string;
  shardId: string;
  replicaId: string;
  reason: UndeliverableReason;
  detail: string;
  /** Sequence of the CommandUndeliverable event. */
  seq: number;
}

export interface CooldownState {
  model: string;
  nodeId: string;
  failures: number;
  untilMs: number;
}

/** One row of the routing table: a ready replica and where its rank 0 serves. */
export interface EndpointEntry {
  replicaId: string;
  url: string;
  nodeId: string;
}

export interface PassState {
  seq: number;
  leaderId: string;
  observedSeq: number;
  nowMs: number;
}

/**
 * Command results a node sent for a command addressed to another node or
 * session, per the node that sent them: refused (they change nothing) and
 * counted here, for check-log and operators. A node with a valid
 * certificate that answers others' commands is broken or hostile.
 */
export interface RefusedResultsState {
  nodeId: string;
  count: number;
  /** The newest one: its sequence, the command it named, and where that command went. */
  lastSeq: number;
  lastCommandId: string;
  lastSessionId: string;
  addressedNodeId: string;
  addressedSessionId: string;
}

export interface ReplicasState {
  catalog: CatalogState;
  readonly replicas: RecordTable<ReplicaState>;
  /** Commands sent and not yet answered. */
  commands: Record<string, CommandState>;
  /** Commands reported undeliverable and not yet handled by a pass, by command id. */
  undeliverable: Record<string, UndeliverableState>;
  /** Failures of a model on a node, keyed `<model>@<node>`, counted from shard reports. */
  failures: Record<string, number>;
  /** Model/node pairs placement avoids, keyed `<model>@<node>`. */
  cooldowns: Record<string, CooldownState>;
  /**
   * The routing table as the passes published it (EndpointsChanged), per
   * model, sorted by replica id. A model whose list became empty is dropped.
   */
  endpoints: Record<string, EndpointEntry[]>;
  /** Rollouts per model (started, stalled, completed, paused). */
  rollouts: Record<string, RolloutState>;
  /** The last reconcile pass folded, or null. */
  lastPass: PassState | null;
  passes: number;
  /** Per model that autoscaled (AutoscaleDecided); dropped with the model. */
  autoscale: Record<string, AutoscaleState>;
  /** Refused command results by the node that sent them; absent until the first. */
  refusedResults?: Record<string, RefusedResultsState>;
}

// -------------------------------------------------------------------- fleet

/** Everything projected from the log: what the reconciler, the API and replay read. */
export interface FleetState {
  /** Last sequence folded (0: nothing yet). */
  seq: number;
  /** Stream time of the last event folded (ms; 0: nothing yet). */
  timeMs: number;
  inventory: InventoryState;
  replicas: ReplicasState;
}

/** The fleet's JSON form (a snapshot, the API, `replay --json`): the tables as plain records. */
export type FleetJson = Omit<FleetState, "inventory" | "replicas"> & {
  inventory: Omit<InventoryState, "nodes"> & { nodes: Record<string, NodeState> };
  replicas: Omit<ReplicasState, "replicas"> & { replicas: Record<string, ReplicaState> };
};

/** The inventory as a reader sees it: nothing in it can be written. */
export interface InventoryView {
  readonly nodes: TableView<NodeState>;
  readonly gateways: Readonly<Record<string, Readonly<GatewayState>>>;
}

/** The replicas state as a reader sees it: nothing in it can be written. */
export type ReplicasView = {
  readonly [K in keyof ReplicasState as K extends "replicas" ? never : K]: Readonly<ReplicasState[K]>;
} & { readonly replicas: TableView<ReplicaState> };

/**
 * The fleet as a reader sees it (a reconcile pass's input and rules, the
 * API): the tables' read side, every container read-only. A write through
 * it does not compile; the fold alone writes, into a `FleetState`.
 */
export interface FleetView {
  readonly seq: number;
  readonly timeMs: number;
  readonly inventory: InventoryView;
  readonly replicas: ReplicasView;
}

export function cooldownKey(model: string, nodeId: string): string {
  return `${model}@${nodeId}`;
}
