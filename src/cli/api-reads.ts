/**
 * The log's records as the operator API pages them (GET /v1/events), for
 * `llmgw events` and `llmgw check-log` without NATS credentials: page after
 * page to the end of the range, and, following, a page more whenever the
 * API's position (GET /v1/stream) moves past what was read.
 */
import type { ApiClient, ApiSchemas } from "../operator/index.js";

/** One record of the log as GET /v1/events answers it. */
export type ApiEventRecord = ApiSchemas["EventsPage"]["events"][number];

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

export async function* apiEvents(client: ApiClient, q: ApiEventsQuery): AsyncGenerator<ApiEventRecord> {
  let after = Math.max(0, (q.fromSeq ?? 1) - 1);
  const pageTo = async function* (to: number | undefined) {
    for (;;) {
      if (q.signal?.aborted) return;
      const query = {
        after,
        limit: PAGE,
        ...(to === undefined ? {} : { to }),
        ...(q.subjects && q.subjects.length > 0 ? { subject: q.subjects.join(",") } : {}),
      };
      const { body } = await client.send((api) => api.GET("/v1/events", { params: { query } }));
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
  for await (const p of client.followPosition(q.signal)) {
    if (p.seq <= after) continue;
    yield* pageTo(p.seq);
  }
}
