/**
 * The log's records as the operator API pages them (GET /v1/events), for
 * `llmgw events` and `llmgw check-log` without NATS credentials: page after
 * page to the end of the range, and, following, a page more whenever the
 * API's position (GET /v1/stream) moves past what was read.
 */
import type { ApiClient, EventRecordJson } from "../operator/index.js";

interface EventsPage {
  events: EventRecordJson[];
  next: number | null;
  lastSeq: number;
}

export interface ApiEventsQuery {
  fromSeq?: number;
  untilSeq?: number;
  /** Relative to the log's prefix, or whole. */
  subjects?: string[];
  follow?: boolean;
  signal?: AbortSignal;
}

/** The most one page asks for (the API's own limit). */
const PAGE = 1000;

export async function* apiEvents(client: ApiClient, q: ApiEventsQuery): AsyncGenerator<EventRecordJson> {
  let after = Math.max(0, (q.fromSeq ?? 1) - 1);
  const pageTo = async function* (to: number | undefined) {
    for (;;) {
      if (q.signal?.aborted) return;
      const params = new URLSearchParams({ after: String(after), limit: String(PAGE) });
      if (to !== undefined) params.set("to", String(to));
      if (q.subjects && q.subjects.length > 0) params.set("subject", q.subjects.join(","));
      const { body } = await client.get<EventsPage>(`/v1/events?${params}`);
      for (const e of body.events) yield e;
      if (body.next !== null) {
        after = body.next;
        continue;
      }
      after = Math.max(after, Math.min(to ?? body.lastSeq, body.lastSeq));
      return;
    }
  };
  if (q.untilSeq !== undefined && after >= q.untilSeq) return;
  yield* pageTo(q.untilSeq);
  if (!q.follow) return;
  for await (const p of client.follow<{ seq: number }>("/v1/stream", q.signal)) {
    if (p.event !== "position" || p.data.seq <= after) continue;
    yield* pageTo(p.data.seq);
  }
}
