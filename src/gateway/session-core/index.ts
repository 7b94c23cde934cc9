export { type Close, type CloseKind, type CloseOutcome, closeOutcome } from "./close.js";
export { isOkAck, reconnect } from "./replies.js";
export { initialState, readDeadlineMs, step } from "./step.js";
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
