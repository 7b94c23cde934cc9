// The invariant checker (docs/ARCHITECTURE.md, "Invariants and where they are tested") over a decoded log. Everything public is named here.

export { type AckedList, parseAckedList } from "./acked-list.js";
export {
  type CheckOptions,
  type CheckReport,
  checkLog,
  DEFAULT_SUPERSEDE_GRACE_MS,
  LogChecker,
} from "./check.js";
export { formatViolation } from "./format.js";
export { type AckedMessage, type CheckedEvent, RULES, type RuleName, type Violation } from "./types.js";
