/**
 * Calls to the operator API from the page, through openapi-fetch typed with
 * the paths generated from the API's OpenAPI document (src/gen/api,
 * `npm run gen:api`): a renamed route, parameter or answer field fails the
 * UI's type check. The token (when the API needs one) is kept in this tab's
 * sessionStorage only and sent as a bearer token, exactly as the CLI does.
 */
import createClient, { type Client } from "openapi-fetch";
import type { paths } from "../../gen/api/schema.ts";
import { parseSse } from "./model.ts";
import type { EventRow, Explain, Fleet, HistoryEntry, RouterRequests, WhatIfResult } from "./types.ts";

const TOKEN_KEY = "llmgw.token";

type TypedApi = Client<paths, "application/json">;

/** What an openapi-fetch call resolves to, either way. */
interface Answer {
  data?: unknown;
  error?: unknown;
  response: Response;
}

export function savedToken(): string {
  try {
    return sessionStorage.getItem(TOKEN_KEY) ?? "";
  } catch {
    return "";
  }
}

export function saveToken(token: string): void {
  try {
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // Storage refused (private mode): the token lives for this page only.
  }
}

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export class Api {
  readonly #api: TypedApi;

  constructor(public token: string) {
    // Same origin: the page is served by the API it calls.
    this.#api = createClient<paths, "application/json">({ baseUrl: "" });
    this.#api.use({
      onRequest: ({ request }) => {
        if (this.token) request.headers.set("authorization", `Bearer ${this.token}`);
        return request;
      },
    });
  }

  /** The answer's body, or ApiFailure with the server's message (a 4xx says what was wrong). */
  async #send<R extends Answer>(call: (api: TypedApi) => Promise<R>): Promise<NonNullable<R["data"]>> {
    const r = await call(this.#api);
    if (!r.response.ok) {
      const msg = (r.error as { error?: { message?: string } } | undefined)?.error?.message;
      throw new ApiFailure(r.response.status, msg ?? `HTTP ${r.response.status}`);
    }
    return r.data as NonNullable<R["data"]>;
  }

  fleet(at: number | null, signal?: AbortSignal): Promise<Fleet> {
    const query = at === null ? {} : { at };
    return this.#send((api) => api.GET("/v1/fleet", { params: { query }, signal }));
  }

  events(
    q: { from: number; to: number; node?: string; replica?: string; kind?: string },
    signal?: AbortSignal,
  ): Promise<{ events: EventRow[]; lastSeq: number }> {
    const query = {
      from: q.from,
      to: q.to,
      limit: 1000,
      ...(q.node ? { node: q.node } : {}),
      ...(q.replica ? { replica: q.replica } : {}),
      ...(q.kind ? { kind: q.kind } : {}),
    };
    return this.#send((api) => api.GET("/v1/events", { params: { query }, signal }));
  }

  /** The reconcile passes of the `span` events up to `to` (the autoscale decisions on the time bar read them). */
  passes(to: number, span: number, signal?: AbortSignal): Promise<{ events: EventRow[]; lastSeq: number }> {
    const query = {
      from: Math.max(1, to - span + 1),
      to: Math.max(1, to),
      limit: 1000,
      subject: "reconciler",
      kind: "reconcilePass",
    };
    return this.#send((api) => api.GET("/v1/events", { params: { query }, signal }));
  }

  /** The fleet after the last event stored at or before an ISO time. */
  fleetAtTime(time: string): Promise<Fleet> {
    return this.#send((api) => api.GET("/v1/fleet", { params: { query: { time } } }));
  }

  /** Requests per replica as the routers the API reads count them (now, not at the position shown). */
  routerRequests(signal?: AbortSignal): Promise<RouterRequests> {
    return this.#send((api) => api.GET("/v1/router/requests", { signal }));
  }

  explain(replicaId: string, at: number): Promise<Explain> {
    return this.#send((api) =>
      api.GET("/v1/replicas/{id}/explain", { params: { path: { id: replicaId }, query: { at } } }),
    );
  }

  history(replicaId: string, at: number): Promise<{ history: HistoryEntry[] }> {
    return this.#send((api) =>
      api.GET("/v1/replicas/{id}/history", { params: { path: { id: replicaId }, query: { at } } }),
    );
  }

  nodeAction(
    nodeId: string,
    action: "cordon" | "uncordon" | "drain",
    reason: string,
  ): Promise<{ seq: number }> {
    const init = { params: { path: { id: nodeId } }, body: reason ? { reason } : {} };
    switch (action) {
      case "cordon":
        return this.#send((api) => api.POST("/v1/nodes/{id}/cordon", init));
      case "uncordon":
        return this.#send((api) => api.POST("/v1/nodes/{id}/uncordon", init));
      case "drain":
        return this.#send((api) => api.POST("/v1/nodes/{id}/drain", init));
      default: {
        const never: never = action;
        throw new Error(`unknown node action ${String(never)}`);
      }
    }
  }

  whatIf(body: { config: Record<string, unknown>; fromSeq?: number; toSeq?: number }): Promise<WhatIfResult> {
    return this.#send((api) => api.POST("/v1/what-if", { body }));
  }

  /**
   * Follows an engine's output (GET /v1/logs/:id, follow=true): `onText`
   * with each piece as it comes, then `onEnd` with how it ended. Needs the
   * operator role; an error before anything streams is thrown.
   */
  async engineLogs(
    id: string,
    tail: number,
    on: { text(t: string): void; end(e: { end: string; error: string }): void },
    signal: AbortSignal,
  ): Promise<void> {
    const body = await this.#send((api) =>
      api.GET("/v1/logs/{id}", {
        params: { path: { id }, query: { follow: "true", tail } },
        parseAs: "stream",
        headers: { accept: "text/event-stream" },
        signal,
      }),
    );
    if (!body) throw new ApiFailure(0, "logs: no body");
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      const parsed = parseSse(buf + value);
      buf = parsed.rest;
      for (const e of parsed.events) {
        if (e.event === "output") on.text(JSON.parse(e.data) as string);
        else if (e.event === "end") on.end(JSON.parse(e.data) as { end: string; error: string });
      }
    }
  }

  /**
   * Follows the API's live position (server-sent events over fetch, so the
   * token goes in a header). Reconnects after a drop until `signal` aborts.
   */
  async follow(onPosition: (p: { seq: number; timeMs: number }) => void, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        const body = await this.#send((api) =>
          api.GET("/v1/stream", { parseAs: "stream", headers: { accept: "text/event-stream" }, signal }),
        );
        if (!body) throw new ApiFailure(0, "stream: no body");
        const reader = body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          const parsed = parseSse(buf + value);
          buf = parsed.rest;
          for (const e of parsed.events) if (e.event === "position") onPosition(JSON.parse(e.data));
        }
      } catch (err) {
        if (signal.aborted) return;
        if (err instanceof ApiFailure && err.status === 401) throw err;
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}
