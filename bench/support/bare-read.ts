/**
 * The raw limit of reading the log: a bare ordered consumer
 * (`consume({ max_messages: 10_000 })`) over the whole stream, each message
 * handed to `onMessage` as it arrives, nothing decoded unless the caller
 * does. The log's own reader adds its end checks, decoding and the
 * records' sequence and time on top of this.
 */
import { DeliverPolicy, type JsMsg } from "@nats-io/jetstream";
import type { Log } from "../../src/log/index.js";

export async function bareRead(
  log: Log,
  lastSeq: number,
  onMessage: (m: JsMsg) => void,
  progress: (n: number) => void,
): Promise<{ n: number; ms: number }> {
  const consumer = await log.js.consumers.get(log.stream, {
    deliver_policy: DeliverPolicy.StartSequence,
    opt_start_seq: 1,
  });
  const start = performance.now();
  let n = 0;
  const messages = await consumer.consume({ max_messages: 10_000 });
  try {
    for await (const m of messages) {
      onMessage(m);
      if (++n % 50_000 === 0) progress(n);
      if (m.seq >= lastSeq) break;
    }
  } finally {
    messages.stop();
  }
  return { n, ms: performance.now() - start };
}
