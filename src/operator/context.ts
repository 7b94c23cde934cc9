/**
 * What every route of the API shares: the log, the API's own projection of
 * it, metrics, and how operator intent is written (append, then wait until
 * the projection has folded it, so the next read sees the write).
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import { type EventInit, newEvent } from "../codec/index.js";
import { Writer_Kind } from "../gen/llmgw/v1/events_pb.js";
import type { Appended, Log } from "../log/index.js";
import type { FleetState } from "../projections/index.js";
import type { ProjectionRuntime } from "../projections/runtime/index.js";
import type { FleetHistory } from "./history.js";

export interface ApiContext {
  log: Log;
  runtime: ProjectionRuntime<FleetState>;
  registry: Registry;
  logger: Logger;
  /** Writer id of this API instance in the events it appends. */
  instanceId: string;
  /** How long a write waits for the projection to fold it. */
  waitTimeoutMs: number;
  /** False while the NATS connection is down (reconnecting). */
  natsConnected(): boolean;
  /** The fleet at any earlier point of the log (time slider). */
  history: FleetHistory;
}

/** Appends operator intent and waits until this API's projection has folded it. */
export async function appendAndWait(
  ctx: ApiContext,
  body: EventInit["body"],
  opts: { expectLastSubjectSeq?: number } = {},
): Promise<Appended> {
  const event = newEvent({
    id: `${ctx.instanceId}-${randomUUID()}`,
    timeUnixMs: BigInt(Date.now()),
    writer: { kind: Writer_Kind.OPERATOR, id: ctx.instanceId },
    body,
  });
  const appended = await ctx.log.append(event, opts);
  await ctx.runtime.waitFor(appended.seq, { timeoutMs: ctx.waitTimeoutMs });
  return appended;
}
