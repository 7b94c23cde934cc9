export type { Bucket, ByteBudget, EventBudget, RateBudget } from "./budget.js";
export {
  type Close,
  type ClosedEvent,
  type CloseKind,
  type CloseOutcome,
  closedEvent,
  closeOutcome,
} from "./close.js";
export { eventBytes } from "./event-bytes.js";
export { type BodyInit, sessionClosedId, sessionEventId } from "./event-ids.js";
export type { PeerIdentity } from "./peer-identity.js";
export { admitRegistration, isRested, type ReconnectDecision } from "./reconnect-rate.js";
export {
  commandResultProblem,
  heartbeatProblem,
  LIMITS,
  registrationProblem,
  shardStatusProblem,
} from "./registration.js";
export { isOkAck } from "./replies.js";
export { awaitsAdmission, initialState, readDeadlineMs, step, usageFlushDelayMs } from "./step.js";
export {
  type CappedField,
  capText,
  MIN_TEXT_CAP,
  type TextCaps,
  truncationMarker,
} from "./text-caps.js";
export type {
  CoreConfig,
  EventDraft,
  Input,
  Note,
  Phase,
  Reply,
  SessionState,
  StepResult,
  TimerKind,
} from "./types.js";
export {
  LOAD_THRESHOLDS,
  REMEMBERED_PROBLEMS,
  type UsageBaseline,
  usageBaseline,
} from "./usage.js";
