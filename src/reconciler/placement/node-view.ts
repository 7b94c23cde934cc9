/**
 * What placement sees of one node and its GPUs during a pass: plain shapes
 * that the fleet view builds (view.ts) and the fit reads (fit.ts), kept in a
 * file of their own so neither of those imports the other for them.
 */

export interface GpuView {
  index: number;
  product: string;
  /** No problem on the GPU (registered or reported since) and none reported for its node. */
  healthy: boolean;
  /** An operator keeps new work off it. */
  cordoned: boolean;
  freeMb: number;
  /** Held by a shard of some replica (ours, not stopped) or taken earlier in this pass. */
  allocated: boolean;
  /** The NVLink domain the GPU is in, or "" (shards prefer GPUs within one domain). */
  nvlink: string;
}

export interface NodeView {
  nodeId: string;
  /** Why the node takes no new work whatever the profile, or "" when it may. */
  blocked: string;
  sessionId: string;
  labels: Record<string, string>;
  gpus: GpuView[];
  /** Fabric names by kind, for multi-node replicas. */
  fabricsByKind: Map<string, string[]>;
  allocatedGpus: number;
  /** Position in FleetView.nodes. */
  pos: number;
  /** Bumped whenever the pass allocates on the node: fits cached for an older version are stale. */
  version: number;
  /** Shards of each model already on the node (spreading one model's replicas). */
  modelShards: Map<string, number>;
}
