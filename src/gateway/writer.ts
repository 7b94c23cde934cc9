/**
 * The one writer of an agent stream. Everything sent to an agent (acks,
 * relayed commands, Reconnect) goes through its bounded queue; the stream's
 * handler drains it in order, one message at a time, so writes are never
 * concurrent. A full queue means the agent is not reading: that is reported
 * to the caller, never absorbed by growing memory.
 */
import { PushQueue, type PushResult } from "../async/push-queue.js";

export type { PushResult };

export class StreamWriter<T> extends PushQueue<T> {
  // A bound is required here: the gateway never queues without one.
  constructor(max: number) {
    super(max);
  }

  /**
   * Queues `msg`, or puts it in the place of the last queued message when
   * `supersedes(last)` says the new one makes it redundant (a cumulative ack
   * after another not yet written). Only a message still waiting is
   * replaced: one already handed to the transport is written as it was.
   */
  pushReplacingLast(msg: T, supersedes: (last: T) => boolean): PushResult | "replaced" {
    if (this.closed) return "closed";
    return this.replaceLast(msg, supersedes) ? "replaced" : this.push(msg);
  }

  /**
   * Ends the stream: OK without `err`; with it, after what is queued, or at
   * once, dropping what is queued, when `dropQueued`.
   */
  close(err: unknown, dropQueued: boolean): void {
    if (err === undefined) this.end();
    else if (dropQueued) this.fail(err);
    else this.end(err);
  }
}
