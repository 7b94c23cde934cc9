/**
 * "Ready" for a process that serves or decides from a projection: connected
 * to NATS, the projection running, and folded up to the log's last sequence
 * as it is now (waiting a moment for it). The API's `/readyz` and the
 * reconciler's both answer with this.
 */
import type { RuntimeStatus } from "./runtime.js";

export interface FollowingProjection {
  readonly status: RuntimeStatus;
  readonly lastSeq: number;
  readonly failure?: Error | undefined;
  waitFor(seq: number, opts?: { timeoutMs?: number }): Promise<void>;
}

export type CaughtUp = { ready: true; detail: { seq: number } } | { ready: false; reason: string };

export async function caughtUp(o: {
  connected: () => boolean;
  projection: FollowingProjection;
  /** The log's last sequence now. */
  logEnd: () => Promise<number>;
  waitMs: number;
}): Promise<CaughtUp> {
  if (!o.connected()) return { ready: false, reason: "not connected to NATS" };
  const p = o.projection;
  if (p.status !== "running") {
    const why = p.failure ? `: ${p.failure.message}` : "";
    return { ready: false, reason: `the projection is ${p.status}${why}` };
  }
  let end: number;
  try {
    end = await o.logEnd();
  } catch (err) {
    return { ready: false, reason: `cannot read the log: ${(err as Error).message}` };
  }
  try {
    await p.waitFor(end, { timeoutMs: o.waitMs });
  } catch {
    return { ready: false, reason: `the projection is at sequence ${p.lastSeq}, the log at ${end}` };
  }
  return { ready: true, detail: { seq: p.lastSeq } };
}
