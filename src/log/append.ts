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
 * Typed writes to the log. Each event goes to its subject (DESIGN §2) with its
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

  async append(event: Event, opts: AppendOptions = {}): Promise<Appended> {
    if (event.id === "") throw new LogError("invalid-argument", "an event needs an id before it is appended");
    const subject = subjectFor(this.subjects, event);
    const data = encodeEvent(event);
    try {
      const ack = await this.publisher.publish(
        subject,
        data,
        event.id,
        { stream: this.stream, lastSubjectSeq: opts.expectLastSubjectSeq },
        opts.timeoutMs ?? 5000,
      );
      return { seq: ack.seq, duplicate: ack.duplicate };
    } catch (err) {
      const e = LogError.from(err);
      throw new LogError(
        e.code,
        `appending ${event.body.case ?? "event"} ${event.id} to ${subject}: ${e.message}`,
        {
          cause: e,
        },
      );
    }
  }
}
