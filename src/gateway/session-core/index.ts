export type { Bucket, ByteBudget, EventBudget, RateBudget } from "./budget.js";
export { type Close, type CloseKind, type CloseOutcome, closeOutcome } from "./close.js";
export { eventBytes } from "./event-bytes.js";
export { admitRegistration, isRested, type ReconnectDecision } from "./reconnect-rate.js";
export { isOkAck, reconnect } from "./replies.js";
export { initialState, readDeadlineMs, step, usageFlushDelayMs } from "./step.js";
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
