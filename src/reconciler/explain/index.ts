// Explanations: which recorded decisions touched a replica or a node, and what another config would have decided. Pure.
export { type Difference, diffDecisions, outcomes } from "./diff.js";
export { formatTouches } from "./format.js";
export { describeCommand, type RecordedPass, type Touch, touchingNode, touchingReplica } from "./select.js";
