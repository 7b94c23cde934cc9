import type { PubAck } from "@nats-io/jetstream";
import { encodeEvent } from "../codec/index.js";
import type { Event } from "../gen/llmgw/v1/events_pb.js";
import type { AckedPublisher, AckHandler } from "./acked-publish.js";
import { LogError, logErrorFrom } from "./errors.js";
import { subjectFor } from "./subject-kinds.js";
import { Subjects } from "./subjects.js";

export interface AppendOptions {
  /**
   * Fencing: the append succeeds only if the last message on the event's
   * subject has this sequence (0 = the subject is empty). Otherwise it fails
   * with a `wrong-last-sequence` LogError.
   */
  expectLastSubjectSeq?: number;
  /** Wait this long for the ack; default 5 s. */
  timeoutMs?: number;
}

export interface Appended {
  /** Stream sequence of the event. */
  seq: number;
  /**
   * True when the stream already held this event id (a retried publish):
   * nothing new was stored and `seq` is the original's.
   */
  duplicate: boolean;
}

/**
 * Typed writes to the log. Each event goes to its subject (docs/ARCHITECTURE.md, "The log") with its
 * id as `Nats-Msg-Id`, so a retry within the duplicate window is stored once.
 */
export class LogAppender {
  readonly subjects: Subjects;

  constructor(
    private readonly publisher: Pick<AckedPublisher, "send">,
    readonly stream: string,
    prefix?: string,
  ) {
    this.subjects = new Subjects(prefix);
  }

  append(event: Event, opts: AppendOptions = {}): Promise<Appended> {
    return new Promise((resolve, reject) =>
      this.appendWith(event, opts, { appended: resolve, failed: reject }),
    );
  }

  /**
   * `append` telling `handler` instead of settling a promise (the gateway's
   * path for every agent message; see AckedPublisher.send). The handler is
   * never called before this returns.
   */
  appendWith(event: Event, opts: AppendOptions, handler: AppendHandler): void {
    if (event.id === "") {
      failSoon(handler, new LogError("invalid-argument", "an event needs an id before it is appended"));
      return;
    }
    let subject: string;
    let data: Uint8Array;
    try {
      subject = subjectFor(this.subjects, event);
      data = encodeEvent(event);
    } catch (err) {
      const what = `appending ${event.body.case ?? "event"} ${event.id}`;
      // A RangeError: the event belongs on no subject (no body, or an id no subject can hold).
      failSoon(
        handler,
        err instanceof RangeError
          ? new LogError("invalid-argument", `${what}: ${err.message}`, { cause: err })
          : logErrorFrom(err, what),
      );
      return;
    }
    this.publisher.send(
      subject,
      data,
      event.id,
      { stream: this.stream, lastSubjectSeq: opts.expectLastSubjectSeq },
      opts.timeoutMs ?? 5000,
      new Appending(event, subject, handler),
    );
  }
}

/** Told how one append ended: exactly one method, once, never before the call that started it returned. */
export interface AppendHandler {
  appended(a: Appended): void;
  failed(err: LogError): void;
}

/** One append's ack handler: the ack is the append's result (a PubAck is an Appended); an error names the event. */
class Appending implements AckHandler {
  constructor(
    private readonly event: Event,
    private readonly subject: string,
    private readonly handler: AppendHandler,
  ) {}

  acked(ack: PubAck): void {
    this.handler.appended(ack);
  }

  failed(err: LogError): void {
    const e = this.event;
    this.handler.failed(
      new LogError(
        err.code,
        `appending ${e.body.case ?? "event"} ${e.id} to ${this.subject}: ${err.message}`,
        {
          cause: err,
        },
      ),
    );
  }
}

function failSoon(handler: AppendHandler, err: LogError): void {
  queueMicrotask(() => handler.failed(err));
}
