/**
 * How often one node may register on a gateway: a token bucket per node
 * (budget.ts), one token per registration that gets this far (its Register
 * read and valid, its identity checked). A node past it is refused with
 * ResourceExhausted and told when to come back (`retryAfterMs`, sent as a
 * Reconnect). Each registration costs a SessionOpened and a SessionClosed
 * in the log whatever the session's own budgets, so a node that reconnects
 * in a loop would otherwise write as fast as it can reconnect. Refused
 * attempts cost nothing: an agent that waits as told gets in. Pure: the
 * shell keeps the buckets and the clock.
 */
import { type Bucket, fullBucket, type RateBudget, spend, waitFor } from "./budget.js";

export type ReconnectDecision =
  | { readonly admitted: true; readonly bucket: Bucket }
  | { readonly admitted: false; readonly retryAfterMs: number; readonly detail: string };

/** A registration of `nodeId` at `at`, given its bucket (undefined: none yet). */
export function admitRegistration(
  nodeId: string,
  bucket: Bucket | undefined,
  budget: RateBudget,
  at: number,
): ReconnectDecision {
  const current = bucket ?? fullBucket(budget, at);
  const left = spend(current, budget, 1, at);
  if (left) return { admitted: true, bucket: left };
  const retryAfterMs = Math.max(1, waitFor(current, budget, 1, at));
  return {
    admitted: false,
    retryAfterMs,
    detail: `node ${nodeId} registers more often than ${budget.perMinute} times a minute (burst ${budget.burst}); reconnect after ${retryAfterMs} ms`,
  };
}

/** Whether a node's bucket is full again at `at` (the shell may forget it). */
export function isRested(bucket: Bucket, budget: RateBudget, at: number): boolean {
  return waitFor(bucket, budget, budget.burst, at) === 0;
}
