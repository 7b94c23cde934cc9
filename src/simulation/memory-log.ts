/**
 * The log in memory, with JetStream's semantics for what llmgw relies on:
 * one stream sequence, the last sequence of every subject, the
 * expected-last-subject-sequence rule, message-id dedupe within a window,
 * one connection's publishes stored in the order they were sent (each
 * simulated process has its own), and acks that come back later (or
 * never: a publish timeout). Appends come in through the real
 * `LogAppender` (src/log/append.ts) — subject, encoding and the publish's
 * expectation built as for NATS — and the expectation is read from the
 * very headers the real publisher writes (PublishHeaders), so a log whose
 * fencing is broken is broken here too.
 */
import type { Event } from "../gen/llmgw/v1/events_pb.js";
import type { AckedPublisher, AckHandler } from "../log/acked-publish.js";
import { LogAppender } from "../log/append.js";
import { decodeEvent } from "../log/decode-event.js";
import { LogError } from "../log/log-error.js";
import { PublishHeaders } from "../log/publish-headers.js";
import { Digest } from "./digest.js";
import type { Scheduler } from "./scheduler.js";

export const SIM_STREAM = "LLMGW";

/** The stream's ack of a publish (JetStream's PubAck, as the publisher's handler takes it). */
type PubAck = Parameters<AckHandler["acked"]>[0];

/** One stored message. */
export interface StoredRecord {
  seq: number;
  /** The stream's time (simulated ms since the epoch). */
  timeMs: number;
  subject: string;
  event: Event;
}

/** What the log does to publishes now (faults). */
export interface LogConditions {
  /** Nothing is stored or acked: every publish times out. */
  unavailable: boolean;
  /** Chance that a stored message's ack is lost (the publisher times out, not knowing). */
  ackLoss: number;
}

export interface MemoryLogOptions {
  scheduler: Scheduler;
  /** Draws in [0, 1) for ack loss and latency. */
  random: () => number;
  /** How long a message id is remembered (JetStream's duplicate window). */
  duplicateWindowMs: number;
  /** Store latency, ms: the ack comes this long (plus jitter up to as much again) after the publish. */
  latencyMs: number;
  /** Told of every message stored. */
  onStored: (r: StoredRecord) => void;
}

/** One simulated process's connection to the log. */
export interface SimConnection {
  appender: LogAppender;
  /** The process died: nothing it sends from now on arrives. */
  close(): void;
}

export class MemoryLog {
  readonly records: StoredRecord[] = [];
  readonly digest = new Digest();
  readonly conditions: LogConditions = { unavailable: false, ackLoss: 0 };
  readonly #o: MemoryLogOptions;
  readonly #lastBySubject = new Map<string, number>();
  /** Message id → its sequence and when it was stored. */
  readonly #ids = new Map<string, { seq: number; atMs: number }>();
  /** Appends through the real append path, onto this log: one connection's (see `connection`). */
  readonly appender: LogAppender;
  /** Publishes refused by their expectation (fencing at work). */
  fenced = 0;
  /** Publishes of a message id the log already held: stored once, acked with the first one's sequence. */
  duplicates = 0;

  constructor(opts: MemoryLogOptions) {
    this.#o = opts;
    this.appender = this.connection().appender;
  }

  /**
   * A connection of its own (a simulated process's): its publishes reach
   * the stream in the order they were sent, as NATS delivers one
   * connection's messages in order (the gateway's ordered pipeline relies
   * on it), while those of two connections interleave as their latencies
   * fall. Once closed (its process died), what it sends never arrives;
   * what it sent before may still be stored.
   */
  connection(): SimConnection {
    const conn = { lastStoreAt: 0, closed: false };
    return {
      appender: new LogAppender({ send: (...a) => this.#send(conn, ...a) }, SIM_STREAM),
      close: () => {
        conn.closed = true;
      },
    };
  }

  get lastSeq(): number {
    return this.records.length;
  }

  lastSubjectSeq(subject: string): number {
    return this.#lastBySubject.get(subject) ?? 0;
  }

  /** AckedPublisher.send of one connection, kept by the log itself. */
  #send(
    conn: { lastStoreAt: number; closed: boolean },
    ...[subject, data, msgId, expect, timeoutMs, handler]: Parameters<AckedPublisher["send"]>
  ): void {
    if (conn.closed) return;
    const s = this.#o.scheduler;
    // The headers the real publisher would write, and what they ask of the stream.
    let headers: PublishHeaders;
    try {
      headers = new PublishHeaders(msgId, expect.stream, expect.lastSubjectSeq);
    } catch (err) {
      s.after(0, () => handler.failed(err as LogError));
      return;
    }
    if (this.conditions.unavailable) {
      s.after(timeoutMs, () => handler.failed(new LogError("unavailable", `no ack within ${timeoutMs} ms`)));
      return;
    }
    // A connection's publishes reach the stream in the order they were sent: the jitter delays, it never reorders.
    const at = Math.max(conn.lastStoreAt, s.now + Math.round(this.#o.latencyMs * (1 + this.#o.random())));
    conn.lastStoreAt = at;
    const latency = at - s.now;
    const ackLost = this.#o.random() < this.conditions.ackLoss;
    s.after(latency, () => {
      const outcome = this.#store(subject, data, headers);
      if (ackLost) {
        s.after(Math.max(0, timeoutMs - latency), () =>
          handler.failed(new LogError("unavailable", `no ack within ${timeoutMs} ms`)),
        );
        return;
      }
      if (outcome instanceof LogError) handler.failed(outcome);
      else handler.acked(outcome);
    });
  }

  /** The stream's rules, in the server's order: the duplicate window, the expected stream, the expected last subject sequence. */
  #store(subject: string, data: Uint8Array, headers: PublishHeaders): PubAck | LogError {
    const now = this.#o.scheduler.now;
    const msgId = headers.get("Nats-Msg-Id");
    const seen = this.#ids.get(msgId);
    if (seen && now - seen.atMs <= this.#o.duplicateWindowMs) {
      this.duplicates++;
      return { stream: SIM_STREAM, seq: seen.seq, duplicate: true, domain: "" };
    }
    const stream = headers.get("Nats-Expected-Stream");
    if (stream !== "" && stream !== SIM_STREAM)
      return new LogError("not-found", `expected stream ${stream} does not match`);
    if (headers.has("Nats-Expected-Last-Subject-Sequence")) {
      const want = Number(headers.get("Nats-Expected-Last-Subject-Sequence"));
      const last = this.lastSubjectSeq(subject);
      if (want !== last) {
        this.fenced++;
        return new LogError("wrong-last-sequence", `wrong last sequence: ${last}`);
      }
    }
    const seq = this.records.length + 1;
    const event = decodeEvent(data, seq);
    const r: StoredRecord = { seq, timeMs: now, subject, event };
    this.records.push(r);
    this.#lastBySubject.set(subject, seq);
    this.#ids.set(msgId, { seq, atMs: now });
    if (this.#ids.size > 200_000) this.#forgetOld(now);
    this.digest.number(seq);
    this.digest.text(subject);
    this.digest.number(now);
    this.digest.bytes(data);
    this.#o.onStored(r);
    return { stream: SIM_STREAM, seq, duplicate: false, domain: "" };
  }

  #forgetOld(now: number): void {
    for (const [id, v] of this.#ids) if (now - v.atMs > this.#o.duplicateWindowMs) this.#ids.delete(id);
  }
}
