// Engine output between the API and the gateways, over core NATS beside the log (never in it).

export { type AskOptions, type AskOutcome, askEngineLog, type LogPiece } from "./ask.js";
export { printable } from "./printable.js";
export { EngineLogSubjects } from "./subjects.js";
export {
  type EngineLogAsk,
  type EngineLogControl,
  type EngineLogEnd,
  engineLogAskSchema,
  engineLogControlSchema,
  engineLogEndSchema,
  KEEP_EVERY_MS,
  KEEP_EXPIRES_MS,
  LOG_ENDS,
  type LogEnd,
  MAX_TAIL_LINES,
  REPLY_KIND_HEADER,
  type ReplyKind,
} from "./wire.js";
