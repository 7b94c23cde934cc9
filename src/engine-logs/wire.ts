/**
 * What the API and a gateway say to each other about one engine-log
 * request (subjects.ts). Both sides check what they read: a gateway's
 * subscription is reachable by anything holding the API role, and the
 * answers carry an agent's words.
 */
import { z } from "zod";
import { ID_PATTERN } from "../ids/index.js";

/** The most lines a request may ask for from the end of the log. */
export const MAX_TAIL_LINES = 10_000;

export const engineLogAskSchema = z.strictObject({
  /** The API's id for the request: names its reply subject and its controls. */
  requestId: z.string().regex(ID_PATTERN),
  nodeId: z.string().min(1).max(253),
  shardId: z.string().regex(ID_PATTERN),
  tailLines: z.number().int().min(0).max(MAX_TAIL_LINES),
  follow: z.boolean(),
});
export type EngineLogAsk = z.output<typeof engineLogAskSchema>;

export const engineLogControlSchema = z.strictObject({
  requestId: z.string().regex(ID_PATTERN),
  /** keep: the client is still there (a follow with no keep for a while ends); cancel: it left. */
  op: z.enum(["keep", "cancel"]),
});
export type EngineLogControl = z.output<typeof engineLogControlSchema>;

/**
 * How a request ended, as the API tells its client. The agent's ends
 * (EngineLogChunk.End), and the gateway's own: it does not hold the node's
 * stream, the stream ended under way, the client stopped keeping it alive,
 * or the gateway's limits on what an agent sends were passed.
 */
export const LOG_ENDS = [
  "done",
  "not-found",
  "limit",
  "cancelled",
  "failed",
  "busy",
  "not-connected",
  "disconnected",
  "expired",
] as const;
export type LogEnd = (typeof LOG_ENDS)[number];

export const engineLogEndSchema = z.strictObject({
  end: z.enum(LOG_ENDS),
  error: z.string().max(2000),
});
export type EngineLogEnd = z.output<typeof engineLogEndSchema>;

/** The header naming what a reply message is; data replies carry raw output bytes as their body. */
export const REPLY_KIND_HEADER = "Llmgw-Log";
export type ReplyKind = "accepted" | "data" | "end";

/** How often the API says a request's client is still there, and how long a gateway waits for it. */
export const KEEP_EVERY_MS = 5_000;
export const KEEP_EXPIRES_MS = 20_000;
