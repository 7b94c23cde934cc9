/**
 * Calls to the operator API from the page. The token (when the API needs
 * one) is kept in this tab's sessionStorage only and sent as a bearer token,
 * exactly as the CLI does.
 */
import { parseSse } from "./model.ts";
import type { EventRow, Explain, Fleet, HistoryEntry, RouterRequests, WhatIfResult } from "./types.ts";

const TOKEN_KEY = "llmgw.token";

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
  constructor(public token: string) {}

  #headers(extra: Record<string, string> = {}): Record<string, string> {
    return this.token ? { ...extra, authorization: `Bearer ${this.token}` } : extra;
  }

  async #get<T>(path: string, signal?: AbortSignal): Promise<T> {
    const res = await fetch(path, { headers: this.#headers(), ...(signal ? { signal } : {}) });
    return this.#read<T>(res);
  }

  async #post<T>(path: string, body: unknown): Promise<T> {
    const res = await fetch(path, {
      method: "POST",
      headers: this.#headers({ "content-type": "application/json" }),
      body: JSON.stringify(body),
    });
    return this.#read<T>(res);
  }

  async #read<T>(res: Response): Promise<T> {
    const text = await res.text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    if (!res.ok) {
      const msg =
        (body as { error?: { message?: string } } | undefined)?.error?.message ?? `HTTP ${res.status}`;
      throw new ApiFailure(res.status, msg);
    }
    return body as T;
  }

  fleet(at: number | null, signal?: AbortSignal): Promise<Fleet> {
    return this.#get(at === null ? "/v1/fleet" : `/v1/fleet?at=${at}`, signal);
  }

  events(
    q: { from: number; to: number; node?: string; replica?: string; kind?: string },
    signal?: AbortSignal,
  ) {
    const p = new URLSearchParams({ from: String(q.from), to: String(q.to), limit: "1000" });
    if (q.node) p.set("node", q.node);
    if (q.replica) p.set("replica", q.replica);
    if (q.kind) p.set("kind", q.kind);
    return this.#get<{ events: EventRow[]; lastSeq: number }>(`/v1/events?${p}`, signal);
  }

  /** The reconcile passes of the `span` events up to `to` (the autoscale decisions on the time bar read them). */
  passes(to: number, span: number, signal?: AbortSignal) {
    const p = new URLSearchParams({
      from: String(Math.max(1, to - span + 1)),
      to: String(Math.max(1, to)),
      limit: "1000",
      subject: "reconciler",
      kind: "reconcilePass",
    });
    return this.#get<{ events: EventRow[]; lastSeq: number }>(`/v1/events?${p}`, signal);
  }

  /** The fleet after the last event stored at or before an ISO time. */
  fleetAtTime(time: string): Promise<Fleet> {
    return this.#get(`/v1/fleet?time=${encodeURIComponent(time)}`);
  }

  /** Requests per replica as the routers the API reads count them (now, not at the position shown). */
  routerRequests(signal?: AbortSignal): Promise<RouterRequests> {
    return this.#get("/v1/router/requests", signal);
  }

  explain(replicaId: string, at: number): Promise<Explain> {
    return this.#get(`/v1/replicas/${encodeURIComponent(replicaId)}/explain?at=${at}`);
  }

  history(replicaId: string, at: number): Promise<{ history: HistoryEntry[] }> {
    return this.#get(`/v1/replicas/${encodeURIComponent(replicaId)}/history?at=${at}`);
  }

  nodeAction(
    nodeId: string,
    action: "cordon" | "uncordon" | "drain",
    reason: string,
  ): Promise<{ seq: number }> {
    return this.#post(`/v1/nodes/${encodeURIComponent(nodeId)}/${action}`, reason ? { reason } : {});
  }

  whatIf(body: { config: Record<string, unknown>; fromSeq?: number; toSeq?: number }): Promise<WhatIfResult> {
    return this.#post("/v1/what-if", body);
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
    const res = await fetch(`/v1/logs/${encodeURIComponent(id)}?follow=true&tail=${tail}`, {
      headers: this.#headers({ accept: "text/event-stream" }),
      signal,
    });
    if (!res.ok || !res.body) {
      await this.#read(res);
      throw new ApiFailure(res.status, `logs: HTTP ${res.status}`);
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
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
        const res = await fetch("/v1/stream", { headers: this.#headers(), signal });
        if (!res.ok || !res.body) throw new ApiFailure(res.status, `stream: HTTP ${res.status}`);
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
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
