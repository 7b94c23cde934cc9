import type { Event } from "../gen/llmgw/v1/events_pb.js";
import type { AckedPublisher } from "./acked-publish.js";
import { encodeEvent, subjectFor } from "./codec.js";
import { LogError } from "./errors.js";
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
    private readonly publisher: AckedPublisher,
    readonly stream: string,
    prefix?: string,
  ) {
    this.subjects = new Subjects(prefix);
  }

  append(event: Event, opts: AppendOptions = {}): Promise<Appended> {
    if (event.id === "") {
      return Promise.reject(new LogError("invalid-argument", "an event needs an id before it is appended"));
    }
    let subject: string;
    let data: Uint8Array;
    try {
      subject = subjectFor(this.subjects, event);
      data = encodeEvent(event);
    } catch (err) {
      return Promise.reject(LogError.from(err, `appending ${event.body.case ?? "event"} ${event.id}`));
    }
    // Not an async function: this runs once per event at full rate, and the
    // promise of the publish itself is all it needs.
    return this.publisher
      .publish(
        subject,
        data,
        event.id,
        { stream: this.stream, lastSubjectSeq: opts.expectLastSubjectSeq },
        opts.timeoutMs ?? 5000,
      )
      .then(
        (ack): Appended => ({ seq: ack.seq, duplicate: ack.duplicate }),
        (err: unknown) => {
          const e = LogError.from(err);
          throw new LogError(
            e.code,
            `appending ${event.body.case ?? "event"} ${event.id} to ${subject}: ${e.message}`,
            { cause: e },
          );
        },
      );
  }
}
