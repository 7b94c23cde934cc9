// Placement: which GPUs on which nodes a replica gets, and why not when none fit. Pure.
export { fitNode, type NodeFit, type Policy } from "./fit.js";
export { verifyKeptView } from "./kept-view.js";
export type { GpuView, NodeView } from "./node-view.js";
export {
  type NoFit,
  type Placed,
  type PlacementResult,
  placeReplica,
  RUNNERS_UP,
  type RuledOutCount,
  type ScoredCandidate,
  type ShardSlot,
  summarize,
} from "./place.js";
export { FleetView } from "./view.js";
