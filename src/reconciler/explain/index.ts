// Explanations: which recorded decisions touched a replica or a node, what another config would have decided, and whether this code decides each recorded pass again the same (check-log --redecide). Pure.

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
export {
  formatRedecided,
  liveGatewaysFor,
  NOT_REDERIVED,
  type RedecidedPass,
  type RedecideOptions,
  type RedecideRecord,
  type RedecideReport,
  redecideLog,
  redecidePass,
} from "./redecide.js";
export { comparePass, firstDifference, type PassDifference } from "./redecide-compare.js";
export { describeCommand, type RecordedPass, type Touch, touchingNode, touchingReplica } from "./select.js";
export {
  liveGatewaysOf,
  runWhatIf,
  type WhatIfPass,
  type WhatIfReader,
  type WhatIfRecord,
  type WhatIfResult,
} from "./what-if.js";
