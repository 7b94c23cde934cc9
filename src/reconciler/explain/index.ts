// Explanations: which recorded decisions touched a replica or a node, and what another config would have decided. Pure.

export {
  type Candidate,
  type PendingDecision,
  type PlacementDecision,
  type ReplicaDecision,
  replicaDecision,
} from "./decision.js";
export { type DescribedEvent, describeEvent } from "./describe-event.js";
export { type Difference, diffDecisions, outcomeNodes, outcomes } from "./diff.js";
export { formatTouches } from "./format.js";
export { describeCommand, type RecordedPass, type Touch, touchingNode, touchingReplica } from "./select.js";
export {
  liveGatewaysOf,
  runWhatIf,
  type WhatIfPass,
  type WhatIfReader,
  type WhatIfRecord,
  type WhatIfResult,
} from "./what-if.js";
