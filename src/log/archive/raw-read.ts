/**
 * The stream's messages from one sequence to another exactly as stored
 * (undecoded), for copies of the log: backups. Every sequence of the range
 * must come, in order; a missing one is an error, never a silent gap.
 */
import { DeliverPolicy } from "@nats-io/jetstream";
import { LogError } from "../errors.js";
import type { Log } from "../log.js";
import { streamTimeMs } from "../reader.js";
import type { RawRecord } from "./segment.js";

export async function* readRawRange(
  log: Log,
  fromSeq: number,
  untilSeq: number,
): AsyncGenerator<RawRecord[]> {
  if (fromSeq > untilSeq) return;
  const consumer = await log.js.consumers.get(log.stream, {
    deliver_policy: DeliverPolicy.StartSequence,
    opt_start_seq: fromSeq,
  });
  let next = fromSeq;
  while (next <= untilSeq) {
    const batch = await consumer.fetch({
      max_messages: Math.min(10_000, untilSeq - next + 1),
      expires: 5_000,
    });
    const out: RawRecord[] = [];
    for await (const m of batch) {
      if (m.seq < next) continue;
      if (m.seq !== next) {
        throw new LogError(
          "not-found",
          `stream ${log.stream} no longer holds sequences ${next}…${m.seq - 1} (purged while they were copied?)`,
        );
      }
      out.push({ seq: m.seq, timeMs: streamTimeMs(m), subject: m.subject, data: m.data });
      next = m.seq + 1;
      if (next > untilSeq) break;
    }
    if (out.length === 0) {
      throw new LogError("unavailable", `reading stream ${log.stream} from ${next}: nothing came within 5 s`);
    }
    yield out;
  }
}
