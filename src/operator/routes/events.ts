/** The log itself, decoded, a page at a time. */
import { toJson } from "@bufbuild/protobuf";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { EventSchema } from "../../gen/llmgw/v1/events_pb.js";
import type { ApiContext } from "../context.js";
import { parseWith, seqParam } from "./params.js";

const SUBJECT = /^([A-Za-z0-9_-]+|\*)(\.([A-Za-z0-9_-]+|\*))*(\.>)?$|^>$/;

const eventsQuery = z.strictObject({
  after: seqParam.default(0),
  limit: z.coerce
    .number({ error: "must be a number" })
    .int("must be a whole number")
    .min(1, "must be at least 1")
    .max(1000, "must be at most 1000")
    .default(100),
  subject: z
    .string()
    .regex(SUBJECT, "must be dot-separated tokens of letters, digits, '_', '-', or the wildcards * and >")
    .max(256)
    .optional(),
});

export interface EventRecordJson {
  seq: number;
  timeMs: number;
  subject: string;
  /** The event as protobuf JSON, or absent when the message is not a valid event. */
  event?: unknown;
  malformed?: string;
}

export function eventRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get("/v1/events", async (req) => {
    const q = parseWith(eventsQuery, req.query, "query");
    const prefix = ctx.log.subjects.prefix;
    // Subjects are given relative to the log's prefix ("catalog", "operator.*"); a full one is taken as is.
    const subject =
      q.subject === undefined
        ? undefined
        : q.subject.startsWith(`${prefix}.`)
          ? q.subject
          : `${prefix}.${q.subject}`;
    const events: EventRecordJson[] = [];
    const lastSeq = await ctx.log.lastSeq();
    for await (const r of ctx.log.read({
      fromSeq: q.after + 1,
      untilSeq: lastSeq,
      ...(subject ? { subjects: [subject] } : {}),
      onMalformed: (err, raw) => {
        events.push({ seq: raw.seq, timeMs: 0, subject: raw.subject, malformed: err.message });
      },
    })) {
      events.push({ seq: r.seq, timeMs: r.timeMs, subject: r.subject, event: toJson(EventSchema, r.event) });
      if (events.length >= q.limit) break;
    }
    const page = events.slice(0, q.limit);
    const last = page.at(-1)?.seq;
    return {
      events: page,
      // Where the next page starts (`after=`), or null when this page reached the end.
      next: page.length >= q.limit && last !== undefined && last < lastSeq ? last : null,
      lastSeq,
    };
  });
}
