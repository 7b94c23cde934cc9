/**
 * What a read does with one stored message, whoever read it (a consumer,
 * reader.ts, or direct gets, direct-read.ts): decode it, check its subject
 * against its kind, and sort it into a record, a refusal, a malformed
 * message or nothing; and how records are gathered into batches so that a
 * refusal or a malformed message is handed over in log order. Pure: no
 * NATS, no I/O, no clock.
 */
import { decodeEventBytes, MalformedEvent } from "../codec/index.js";
import { malformedError } from "./decode-event.js";
import type { LogError } from "./log-error.js";
import type { LogRecord, ReadOptions } from "./reader.js";
import { type RefusedEvent, subjectRefusal } from "./subject-kinds.js";
import type { Subjects } from "./subjects.js";

/** A stored message as every way of reading the log sees it. */
export interface StoredMessage {
  readonly seq: number;
  readonly subject: string;
  readonly data: Uint8Array;
}

export type Admitted =
  | { kind: "record"; record: LogRecord }
  | { kind: "refused"; refused: RefusedEvent }
  | { kind: "malformed"; error: LogError }
  | { kind: "skip" };

/**
 * One stored message through the reader's start time, decode and subject ↔
 * kind check. Before the read's start time it is skipped: a replica still
 * catching up may place the start time before it (at its own end). A
 * refusal nobody asked to be told of (`onRefused`) is skipped too.
 */
export function admit(
  layout: Subjects,
  m: StoredMessage,
  timeMs: number,
  opts: Pick<ReadOptions, "fromTimeMs" | "onRefused">,
): Admitted {
  if (opts.fromTimeMs !== undefined && timeMs < opts.fromTimeMs) return { kind: "skip" };
  const event = decodeEventBytes(m.data, m.seq);
  if (event instanceof MalformedEvent) return { kind: "malformed", error: malformedError(event, m.seq) };
  const refusal = subjectRefusal(layout, m.subject, event);
  if (refusal === undefined)
    return { kind: "record", record: { seq: m.seq, timeMs, subject: m.subject, event } };
  if (!opts.onRefused) return { kind: "skip" };
  return {
    kind: "refused",
    refused: {
      seq: m.seq,
      timeMs,
      subject: m.subject,
      kind: event.body.case as RefusedEvent["kind"],
      event,
      reason: refusal,
    },
  };
}

/**
 * Hands a refused or malformed message to the read's callback. A malformed
 * one with no `onMalformed` ends the read with its error. The caller yields
 * the records gathered before it first, so everything arrives in log order.
 */
export function tell(
  admitted: Exclude<Admitted, { kind: "record" | "skip" }>,
  m: StoredMessage,
  opts: Pick<ReadOptions, "onMalformed" | "onRefused">,
): void {
  switch (admitted.kind) {
    case "malformed":
      if (!opts.onMalformed) throw admitted.error;
      opts.onMalformed(admitted.error, { seq: m.seq, subject: m.subject, data: m.data });
      return;
    case "refused":
      opts.onRefused?.(admitted.refused);
      return;
    default: {
      const never: never = admitted;
      throw new Error(`unknown admission ${String(never)}`);
    }
  }
}

/** Records gathered for the next batch a read yields. */
export class RecordBatch {
  #records: LogRecord[] = [];

  push(record: LogRecord): void {
    this.#records.push(record);
  }

  /** What was gathered, handed out (the batch starts anew), or undefined when nothing was. */
  take(): LogRecord[] | undefined {
    if (this.#records.length === 0) return undefined;
    const taken = this.#records;
    this.#records = [];
    return taken;
  }
}
