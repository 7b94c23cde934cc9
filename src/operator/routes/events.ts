/**
 * The log itself, decoded, a page at a time; filterable by node, replica and
 * kind (what the UI's event list beside the slider asks for).
 */
import { toJson } from "@bufbuild/protobuf";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { EVENT_KINDS } from "../../codec/index.js";
import { EventSchema } from "../../gen/llmgw/v1/events_pb.js";
import { invalidNodeIdReason } from "../../ids/index.js";
import { describeEvent } from "../../reconciler/index.js";
import type { ApiContext } from "../context.js";
import { invalid } from "../errors.js";
import { parseWith, seqParam } from "./params.js";

const SUBJECT = /^([A-Za-z0-9_-]+|\*)(\.([A-Za-z0-9_-]+|\*))*(\.>)?$|^>$/;

/** The kinds the `kind` filter takes: every event kind, and `unknown` for a kind from a later version. */
const KIND_FILTERS: [string, ...string[]] = ["unknown", ...EVENT_KINDS];

export const eventsQuery = z.strictObject({
  after: seqParam.default(0),
  from: seqParam.optional(),
  to: seqParam.optional(),
  limit: z.coerce
    .number({ error: "must be a number" })
    .int("must be a whole number")
    .min(1, "must be at least 1")
    .max(1000, "must be at most 1000")
    .default(100),
  // One subject, or several comma-separated (what `llmgw events --subject A --subject B` asks for).
  subject: z
    .string()
    .max(2048)
    .transform((s) => s.split(","))
    .pipe(
      z
        .array(
          z
            .string()
            .regex(
              SUBJECT,
              "must be dot-separated tokens of letters, digits, '_', '-', or the wildcards * and >",
            )
            .max(256),
        )
        .max(16, "at most 16 subjects"),
    )
    .optional(),
  // The id as typed, dots included; the same rule as everywhere a node id is taken.
  node: z
    .string()
    .superRefine((id, ctx) => {
      const why = invalidNodeIdReason(id, "");
      if (why) ctx.addIssue({ code: "custom", message: why.trimStart() });
    })
    .optional(),
  replica: z
    .string()
    .regex(/^[A-Za-z0-9._:-]{1,128}$/, "must be a replica id: letters, digits, '.', ':', '_', '-'")
    .optional(),
  kind: z
    .string()
    .transform((s) => s.split(",").filter((k) => k !== ""))
    .pipe(
      z.array(
        z.enum(KIND_FILTERS, { error: (i) => `unknown event kind ${JSON.stringify(i.input)}` }),
        "must be a comma-separated list of event kinds",
      ),
    )
    .optional(),
});

export interface EventRecordJson {
  seq: number;
  timeMs: number;
  subject: string;
  /** The event kind (`reconcilePass`, …); absent for a malformed message. */
  kind?: string;
  /** The event in a line for people. */
  text?: string;
  nodeIds?: string[];
  replicaIds?: string[];
  /** The event as protobuf JSON, or absent when the message is not a valid event. */
  event?: unknown;
  malformed?: string;
  /** Why the event was refused (stored on a subject its kind may not be written to; never folded). */
  refused?: string;
}

export function eventRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get("/v1/events", async (req) => {
    const q = parseWith(eventsQuery, req.query, "query");
    if (q.from !== undefined && q.to !== undefined && q.from > q.to) {
      throw invalid(`from (${q.from}) must not be after to (${q.to})`);
    }
    const prefix = ctx.log.subjects.prefix;
    // Subjects are given relative to the log's prefix ("catalog", "operator.*"); a full one is taken as is.
    const subjects = (q.subject ?? []).map((s) => (s.startsWith(`${prefix}.`) ? s : `${prefix}.${s}`));
    const kinds = q.kind && q.kind.length > 0 ? new Set<string>(q.kind) : undefined;
    const filtered = kinds !== undefined || q.node !== undefined || q.replica !== undefined;
    const events: EventRecordJson[] = [];
    const lastSeq = await ctx.log.lastSeq();
    const untilSeq = Math.min(q.to ?? lastSeq, lastSeq);
    const fromSeq = Math.max(q.after + 1, q.from ?? 1);
    let readTo = fromSeq - 1;
    for await (const r of ctx.log.read({
      fromSeq,
      untilSeq,
      ...(subjects.length > 0 ? { subjects } : {}),
      onMalformed: (err, raw) => {
        readTo = raw.seq;
        if (!filtered) events.push({ seq: raw.seq, timeMs: 0, subject: raw.subject, malformed: err.message });
      },
      onRefused: (r) => {
        readTo = r.seq;
        if (kinds && !kinds.has(r.kind)) return;
        if (q.node !== undefined || q.replica !== undefined) return;
        if (events.length >= q.limit) return;
        events.push({
          seq: r.seq,
          timeMs: r.timeMs,
          subject: r.subject,
          kind: r.kind,
          event: toJson(EventSchema, r.event),
          refused: r.reason,
        });
      },
    })) {
      readTo = r.seq;
      const d = describeEvent(r.event);
      if (kinds && !kinds.has(d.kind)) continue;
      if (q.node !== undefined && !d.nodeIds.includes(q.node)) continue;
      if (q.replica !== undefined && !d.replicaIds.includes(q.replica)) continue;
      events.push({
        seq: r.seq,
        timeMs: r.timeMs,
        subject: r.subject,
        kind: d.kind,
        text: d.text,
        nodeIds: d.nodeIds,
        replicaIds: d.replicaIds,
        event: toJson(EventSchema, r.event),
      });
      if (events.length >= q.limit) break;
    }
    const page = events.slice(0, q.limit);
    const full = page.length >= q.limit;
    return {
      events: page,
      // Where the next page starts (`after=`), or null when this page reached the end of the range.
      next: full && readTo < untilSeq ? readTo : null,
      lastSeq,
    };
  });
}
