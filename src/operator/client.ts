/**
 * The client of the operator API for the CLI and tools: openapi-fetch typed
 * with the paths generated from the API's own OpenAPI document
 * (src/gen/api/schema.ts, `npm run gen:api`), so a renamed route, parameter
 * or answer field is a type error at every caller. A failed call raises
 * ApiCallError with the server's error code, or code "unreachable" when
 * there was no answer.
 */
import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "../gen/api/schema.js";
import type { FieldIssue } from "./catalog/index.js";

/** The API's paths and operations as the document gives them. */
export type ApiPaths = paths;
/** The API's named schemas (`ApiSchemas["NodeView"]`), as the document gives them. */
export type ApiSchemas = components["schemas"];
/**
 * The typed calls: `api.GET("/v1/nodes/{id}", { params: { path: { id } } })`.
 * Answers are typed as their JSON (an event stream is read with `parseAs: "stream"`).
 */
export type TypedApi = Client<paths, "application/json">;

/** What GET /v1/stream sends as `event: position` (an event stream: its data is described, not schema'd). */
export interface StreamPosition {
  seq: number;
  timeMs: number;
}

export interface ApiClientOptions {
  /** Base URL, e.g. http://127.0.0.1:8080 */
  url: string;
  /** The bearer token; the API records its name as the operator of every write. */
  token?: string;
  timeoutMs?: number;
}

export class ApiCallError extends Error {
  override readonly name = "ApiCallError";
  constructor(
    /** HTTP status, 0 when the server did not answer. */
    readonly status: number,
    readonly code: string,
    message: string,
    readonly issues: FieldIssue[] = [],
  ) {
    super(message);
  }
}

export interface ApiResponse<T> {
  body: T;
  headers: Headers;
}

/** What an openapi-fetch call resolves to, either way. */
interface Answer {
  data?: unknown;
  error?: unknown;
  response: Response;
}

const EVENT_STREAM = "text/event-stream";

/** What `followEngineLogs` yields: the engine's text, then why it ended. */
export type EngineLogEvent = { kind: "output"; text: string } | { kind: "end"; end: string; error: string };

export class ApiClient {
  readonly #base: string;
  /** The typed calls; run them through `send`, which turns a failure into ApiCallError. */
  readonly api: TypedApi;
  /** "GET /v1/nodes/x" of each answer, for the message of an error without a body. */
  readonly #asked = new WeakMap<Response, string>();

  constructor(readonly opts: ApiClientOptions) {
    this.#base = opts.url.replace(/\/+$/, "");
    this.api = createClient<paths, "application/json">({
      baseUrl: this.#base,
      headers: {
        accept: "application/json",
        ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
      },
      fetch: (req) => this.#fetch(req),
    });
  }

  /**
   * Every request: a timeout, except for an event stream (which lasts until
   * its reader stops), and "unreachable" when no answer came.
   */
  async #fetch(req: Request): Promise<Response> {
    const stream = req.headers.get("accept") === EVENT_STREAM;
    const signal = stream
      ? req.signal
      : AbortSignal.any([req.signal, AbortSignal.timeout(this.opts.timeoutMs ?? 30_000)]);
    let res: Response;
    try {
      res = await fetch(req, { signal });
    } catch (err) {
      // The caller stopped it: not a failure to report.
      if (req.signal.aborted) throw err;
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      const why = cause?.code ?? cause?.message ?? (err as Error).message;
      throw new ApiCallError(
        0,
        "unreachable",
        `cannot reach the API at ${this.#base} (${why}); is \`llmgw api\` running? (--api or LLMGW_API_URL chooses another)`,
      );
    }
    const url = new URL(req.url);
    this.#asked.set(res, `${req.method} ${url.pathname}${url.search}`);
    return res;
  }

  /**
   * Runs a typed call and gives its body, or raises ApiCallError with the
   * server's code, message and field issues (4xx/5xx).
   */
  async send<R extends Answer>(
    call: (api: TypedApi) => Promise<R>,
  ): Promise<ApiResponse<NonNullable<R["data"]>>> {
    const r = await call(this.api);
    if (!r.response.ok) throw this.#failure(r.response, r.error);
    return { body: r.data as NonNullable<R["data"]>, headers: r.response.headers };
  }

  /**
   * PUT /v1/catalog with a catalog file as written: YAML or JSON text, checked
   * by the server field by field (its issues name each bad field), so a YAML
   * error keeps its line. `ifMatch`: the catalog sequence the change is based on.
   */
  applyCatalogText(text: string, format: "json" | "yaml", ifMatch?: number) {
    return this.send((api) =>
      api.PUT("/v1/catalog", {
        params: { header: ifMatch === undefined ? {} : { "If-Match": `"${ifMatch}"` } },
        // The text goes as it is; the typed body is the file it holds, which the server checks.
        body: text as unknown as ApiSchemas["CatalogFile"],
        bodySerializer: (): string => text,
        headers: { "content-type": format === "json" ? "application/json" : "application/yaml" },
      }),
    );
  }

  #failure(res: Response, body: unknown): ApiCallError {
    const e = (body as Partial<ApiSchemas["Error"]> | undefined)?.error;
    return new ApiCallError(
      res.status,
      e?.code ?? `http-${res.status}`,
      e?.message ?? `${this.#asked.get(res) ?? res.url} answered ${res.status} ${res.statusText}`,
      e?.issues ?? [],
    );
  }

  /**
   * The API's live position (GET /v1/stream): at once and whenever the log
   * moves, until the caller stops reading or `signal` aborts.
   */
  async *followPosition(signal?: AbortSignal): AsyncGenerator<StreamPosition> {
    const open = (api: TypedApi) =>
      api.GET("/v1/stream", { parseAs: "stream", headers: { accept: EVENT_STREAM }, signal });
    for await (const e of this.#follow(open, signal)) {
      if (e.event === "position") yield e.data as StreamPosition;
    }
  }

  /** The routing table (GET /v1/endpoints?follow=true): at once and after every change. */
  async *followEndpoints(
    query: { model?: string },
    signal?: AbortSignal,
  ): AsyncGenerator<ApiSchemas["Endpoints"]> {
    const open = (api: TypedApi) =>
      api.GET("/v1/endpoints", {
        params: { query: { ...query, follow: "true" } },
        parseAs: "stream",
        headers: { accept: EVENT_STREAM },
        signal,
      });
    for await (const e of this.#follow(open, signal)) {
      if (e.event === "endpoints") yield e.data as ApiSchemas["Endpoints"];
    }
  }

  /**
   * An engine's output (GET /v1/logs/{id}): `output` events carry text as it
   * comes, then one `end` says why it stopped.
   */
  async *followEngineLogs(
    id: string,
    query: { follow?: boolean; tail?: number },
    signal?: AbortSignal,
  ): AsyncGenerator<EngineLogEvent> {
    const open = (api: TypedApi) =>
      api.GET("/v1/logs/{id}", {
        params: {
          path: { id },
          query: {
            ...(query.follow ? { follow: "true" as const } : {}),
            ...(query.tail !== undefined ? { tail: query.tail } : {}),
          },
        },
        parseAs: "stream",
        headers: { accept: EVENT_STREAM },
        signal,
      });
    for await (const e of this.#follow(open, signal)) {
      if (e.event === "output" && typeof e.data === "string") yield { kind: "output", text: e.data };
      else if (e.event === "end") yield { kind: "end", ...(e.data as { end: string; error: string }) };
    }
  }

  /**
   * Follows a server-sent event stream: yields each event's name and parsed
   * data until the server ends it. No timeout: a follow lasts until the
   * caller stops reading or `signal` aborts.
   */
  async *#follow(
    open: (api: TypedApi) => Promise<Answer>,
    signal?: AbortSignal,
  ): AsyncGenerator<{ event: string; data: unknown }> {
    let body: ReadableStream<Uint8Array>;
    try {
      const r = await this.send(open);
      body = r.body as ReadableStream<Uint8Array>;
    } catch (err) {
      if (signal?.aborted) return;
      throw err;
    }
    const decoder = new TextDecoder();
    let buf = "";
    try {
      for await (const chunk of body) {
        buf += decoder.decode(chunk, { stream: true });
        for (let i = buf.indexOf("\n\n"); i >= 0; i = buf.indexOf("\n\n")) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let event = "message";
          const data: string[] = [];
          for (const line of block.split("\n")) {
            if (line.startsWith("event: ")) event = line.slice(7);
            else if (line.startsWith("data: ")) data.push(line.slice(6));
          }
          // Comment-only blocks (keepalives) carry no data.
          if (data.length > 0) yield { event, data: JSON.parse(data.join("\n")) as unknown };
        }
      }
    } catch (err) {
      if (!signal?.aborted) throw err;
    }
  }
}
